package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/mongodb/dump"
)

// mongoBackupOptions are the settings of `backup mongo` and `restore mongo`.
type mongoBackupOptions struct {
	URI      string
	Database string
	Dir      string
	Timeout  time.Duration
	// AtClusterTime ("t,i"): backup only, read at this cluster time (one shard of a sharded
	// cluster at the point chosen for all of them).
	AtClusterTime string
}

func (o *mongoBackupOptions) register(cmd *cobra.Command, dbUsage string) {
	f := cmd.Flags()
	f.StringVar(&o.URI, "mongo-uri", "", "MongoDB connection string of a replica set (or of one shard's replica set)")
	f.StringVar(&o.Database, "mongo-db", "shardmart", dbUsage)
	f.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "time limit for the whole command")
	fromEnv(f, "mongo-uri", "SHARDMART_MONGO_URI")
	fromEnv(f, "mongo-db", "SHARDMART_MONGO_DB")
}

func newCmdBackupMongo(stdio IO, runF func(context.Context, mongoBackupOptions) error) *cobra.Command {
	var o mongoBackupOptions
	cmd := &cobra.Command{
		Use:   "mongo",
		Short: "Dump a MongoDB database at one cluster time (snapshot reads) in mongodump's layout, sealed with a manifest",
		Long: `Reads every collection of --mongo-db at one cluster time (readConcern "snapshot"
with atClusterTime) and writes mongodump's layout into --out, which must be empty or absent:
<out>/<db>/<coll>.bson and <coll>.metadata.json, then manifest.json (written last) with
consistent_at, the exact cluster time and each collection's count.

The whole backup must finish within the members' minSnapshotHistoryWindowInSeconds (300 s by
default), or the read fails with SnapshotTooOld; see docs/operations.md "MongoDB".`,
		Example: `  shardmart backup mongo --mongo-uri 'mongodb://db1,db2,db3/?replicaSet=rs0' --out /backups/shop-2026-11-28
  # one shard of a sharded cluster, at the cluster time chosen for all shards:
  shardmart backup mongo --mongo-uri 'mongodb://sh1a/?replicaSet=sh1' --at-cluster-time 1764331200,7 --out /backups/sh1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, backupMongo, runF)
		},
	}
	o.register(cmd, "database to back up")
	cmd.Flags().StringVar(&o.Dir, "out", "", "directory to write the backup into: created if missing, refused unless empty (required)")
	_ = cmd.MarkFlagRequired("out")
	cmd.Flags().StringVar(&o.AtClusterTime, "at-cluster-time", "", `read at this cluster time, "seconds,increment" (default: the primary's last applied operation time, now)`)
	return cmd
}

func newCmdRestoreMongo(stdio IO, runF func(context.Context, mongoBackupOptions) error) *cobra.Command {
	var o mongoBackupOptions
	cmd := &cobra.Command{
		Use:   "mongo",
		Short: "Restore a MongoDB backup into an empty database and check every collection's count",
		Long: `Verifies --from against its manifest (every file's size and SHA-256), refuses a database
that has any collection, recreates each collection with its options, inserts its documents in
ordered batches, builds its indexes, then counts each collection against the manifest. Any
difference exits non-zero.`,
		Example: `  shardmart restore mongo --mongo-uri 'mongodb://new1,new2,new3/?replicaSet=rs1' --mongo-db shardmart --from /backups/shop-2026-11-28`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, restoreMongo, runF)
		},
	}
	o.register(cmd, "database to restore into; it must have no collection")
	cmd.Flags().StringVar(&o.Dir, "from", "", "backup directory written by `shardmart backup mongo` (required)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func backupMongo(ctx context.Context, stdio IO, o mongoBackupOptions) error {
	bo := dump.BackupOptions{Database: o.Database, Out: o.Dir, Progress: stdio.Err}
	if o.AtClusterTime != "" {
		ts, err := dump.ParseTimestamp(o.AtClusterTime)
		if err != nil {
			return fmt.Errorf("--at-cluster-time: %w", err)
		}
		bo.AtClusterTime = &ts
	}
	return o.withClient(ctx, func(ctx context.Context, client *mongo.Client) error {
		m, err := dump.Backup(ctx, client, bo)
		if err != nil {
			return err
		}
		var docs int64
		for _, n := range m.Counts {
			docs += n
		}
		fmt.Fprintf(stdio.Out, "backup of %s sealed in %s: %d collections, %d documents, consistent at %s (cluster time %s), took %s\n",
			m.Source, o.Dir, len(m.Counts), docs, m.ConsistentAt.Format(time.RFC3339), m.Meta[dump.MetaClusterTime], m.Finished.Sub(m.Started).Round(time.Millisecond))
		return nil
	})
}

func restoreMongo(ctx context.Context, stdio IO, o mongoBackupOptions) error {
	return o.withClient(ctx, func(ctx context.Context, client *mongo.Client) error {
		start := time.Now()
		m, err := dump.Restore(ctx, client, dump.RestoreOptions{Dir: o.Dir, Database: o.Database, Progress: stdio.Err})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdio.Out, "restored %s into %s: %d collections, every count as in the manifest, consistent at %s, took %s\n",
			o.Dir, o.Database, len(m.Counts), m.ConsistentAt.Format(time.RFC3339), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// withClient connects to --mongo-uri and runs fn within --timeout.
func (o mongoBackupOptions) withClient(ctx context.Context, fn func(context.Context, *mongo.Client) error) error {
	if o.URI == "" {
		return errors.New("no MongoDB URI: pass --mongo-uri or set SHARDMART_MONGO_URI to the replica set, e.g. mongodb://127.0.0.1:27017/?replicaSet=rs0")
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(o.URI).SetServerSelectionTimeout(15 * time.Second))
	if err != nil {
		return fmt.Errorf("connect to MongoDB: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	err = fn(ctx, client)
	if refused, ok := access.Refusal(err); err != nil && ok {
		return refused
	}
	return err
}
