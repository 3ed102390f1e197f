// Package dump takes a consistent backup of one MongoDB database in mongodump's directory
// layout and restores it into an empty database.
//
// The backup reads every collection at one cluster time (readConcern "snapshot" with
// atClusterTime), so it holds the database exactly as it was at that moment across all
// collections, with no oplog replay: <out>/<db>/<coll>.bson holds the documents (concatenated
// BSON, as mongodump writes them) and <coll>.metadata.json the collection's options, indexes
// and UUID in mongodump's canonical Extended JSON. The directory is sealed with a manifest
// (internal/backup) that records the cluster time and each collection's count.
package dump

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/backup"
)

// StoreName is the manifest's store for MongoDB backups.
const StoreName = "mongo"

// Meta keys of the manifest.
const (
	MetaClusterTime = "cluster_time"   // "t,i": the exact atClusterTime every collection was read at
	MetaTopology    = "topology"       // replica set name, or "mongos"
	MetaServer      = "server_version" // the source's MongoDB version
	MetaShardKeys   = "shard_keys"     // JSON {collection: key} when the source is sharded
)

// codeSnapshotTooOld is the server's answer when atClusterTime has fallen out of the snapshot
// history window (minSnapshotHistoryWindowInSeconds).
const codeSnapshotTooOld = 239

// BackupOptions describe one backup.
type BackupOptions struct {
	Database string // the database to back up
	Out      string // an empty (or absent) directory
	// AtClusterTime, when set, reads at this cluster time instead of taking the current one:
	// how the shards of a sharded cluster are backed up at one common point, one shard primary
	// at a time.
	AtClusterTime *bson.Timestamp
	// Progress gets a line per collection and one every ProgressEvery on long collections.
	Progress      io.Writer
	ProgressEvery time.Duration // default 5 s
	// afterCollection runs after each collection's files are closed (tests: a backup killed
	// half-way).
	afterCollection func(coll string)
}

// Backup dumps o.Database through client at one cluster time and seals the directory.
func Backup(ctx context.Context, client *mongo.Client, o BackupOptions) (backup.Manifest, error) {
	if o.Database == "" {
		return backup.Manifest{}, errors.New("dump: no database to back up")
	}
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 5 * time.Second
	}
	if err := backup.EmptyDir(o.Out); err != nil {
		return backup.Manifest{}, err
	}
	started := time.Now().UTC()
	src, err := describe(ctx, client)
	if err != nil {
		return backup.Manifest{}, err
	}
	at := src.operationTime
	if o.AtClusterTime != nil {
		at = *o.AtClusterTime
	}
	if at.IsZero() {
		return backup.Manifest{}, errors.New("dump: the server reported no cluster time: a backup needs a replica set member or a mongos, not a standalone mongod")
	}
	db := client.Database(o.Database)
	colls, err := listCollections(ctx, db)
	if err != nil {
		return backup.Manifest{}, err
	}
	if len(colls) == 0 {
		return backup.Manifest{}, fmt.Errorf("dump: database %q has no collections: nothing to back up (check --mongo-db)", o.Database)
	}
	dir := filepath.Join(o.Out, o.Database)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return backup.Manifest{}, fmt.Errorf("dump: %w", err)
	}
	progress(o.Progress, "backing up %s at cluster time %s (%s), %d collections", o.Database, tsString(at), tsTime(at).Format(time.RFC3339), len(colls))
	counts := map[string]int64{}
	for _, c := range colls {
		if err := writeMetadata(ctx, db, c, dir); err != nil {
			return backup.Manifest{}, err
		}
		n, err := dumpCollection(ctx, client, db.Collection(c.Name), at, filepath.Join(dir, c.Name+".bson"), o)
		if err != nil {
			return backup.Manifest{}, err
		}
		counts[c.Name] = n
		if o.afterCollection != nil {
			o.afterCollection(c.Name)
		}
	}
	// Collection metadata is read as it is now, not at the snapshot: a collection dropped or
	// recreated meanwhile would pair one collection's documents with another's indexes.
	after, err := listCollections(ctx, db)
	if err != nil {
		return backup.Manifest{}, err
	}
	if err := sameCollections(colls, after); err != nil {
		return backup.Manifest{}, err
	}
	meta := map[string]string{MetaClusterTime: tsString(at), MetaTopology: src.topology, MetaServer: src.version}
	keys, err := shardKeys(ctx, client, o.Database)
	if err != nil {
		return backup.Manifest{}, err
	}
	if len(keys) > 0 {
		b, err := json.Marshal(keys)
		if err != nil {
			return backup.Manifest{}, fmt.Errorf("dump: shard keys: %w", err)
		}
		meta[MetaShardKeys] = string(b)
	}
	if err := backup.SyncTree(o.Out); err != nil {
		return backup.Manifest{}, fmt.Errorf("dump: %w", err)
	}
	return backup.Seal(o.Out, backup.Manifest{
		Store: StoreName, ConsistentAt: tsTime(at), Started: started,
		Source: o.Database, Counts: counts, Meta: meta,
	})
}

// source is what the backup records of the server it reads.
type sourceInfo struct {
	topology      string
	version       string
	operationTime bson.Timestamp
}

// describe asks the primary (or the mongos) for its last applied operation time: every write
// acknowledged before this call is at or before it, so a snapshot there holds them all.
func describe(ctx context.Context, client *mongo.Client) (sourceInfo, error) {
	admin := client.Database("admin")
	var hello struct {
		SetName       string         `bson:"setName"`
		Msg           string         `bson:"msg"`
		OperationTime bson.Timestamp `bson:"operationTime"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}, options.RunCmd().SetReadPreference(readpref.Primary())).Decode(&hello); err != nil {
		return sourceInfo{}, fmt.Errorf("dump: hello: %w", err)
	}
	var build struct {
		Version string `bson:"version"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build); err != nil {
		return sourceInfo{}, fmt.Errorf("dump: buildInfo: %w", err)
	}
	s := sourceInfo{topology: hello.SetName, version: build.Version, operationTime: hello.OperationTime}
	if hello.Msg == "isdbgrid" {
		s.topology = "mongos"
	}
	if s.topology == "" {
		return sourceInfo{}, errors.New("dump: the server is a standalone mongod: snapshot reads need a replica set member or a mongos")
	}
	return s, nil
}

// collInfo is one entry of listCollections.
type collInfo struct {
	Name    string `bson:"name"`
	Type    string `bson:"type"`
	Options bson.D `bson:"options"`
	Info    struct {
		UUID bson.Binary `bson:"uuid"`
	} `bson:"info"`
}

func (c collInfo) uuid() string {
	if c.Info.UUID.Subtype != bson.TypeBinaryUUID {
		return ""
	}
	return hex.EncodeToString(c.Info.UUID.Data)
}

// listCollections lists the database's collections, system collections left out (as mongodump
// does), sorted by name. A view or time-series collection is refused: the shop has none, and
// neither round-trips through a plain find and insert.
func listCollections(ctx context.Context, db *mongo.Database) ([]collInfo, error) {
	cur, err := db.ListCollections(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("dump: list collections of %s: %w", db.Name(), err)
	}
	var all []collInfo
	if err := cur.All(ctx, &all); err != nil {
		return nil, fmt.Errorf("dump: list collections of %s: %w", db.Name(), err)
	}
	var out []collInfo
	for _, c := range all {
		if strings.HasPrefix(c.Name, "system.") {
			continue
		}
		if c.Type != "" && c.Type != "collection" {
			return nil, fmt.Errorf("dump: %s.%s is a %s: only collections are backed up", db.Name(), c.Name, c.Type)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b collInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sameCollections refuses a backup whose collections changed (created, dropped, recreated)
// while it ran.
func sameCollections(before, after []collInfo) error {
	key := func(cs []collInfo) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Name + "/" + c.uuid()
		}
		return out
	}
	if b, a := key(before), key(after); !slices.Equal(b, a) {
		return fmt.Errorf("dump: the collections changed while the backup ran (before %v, after %v): run it again", b, a)
	}
	return nil
}

// metadata is mongodump's <coll>.metadata.json.
type metadata struct {
	Options        bson.D   `bson:"options,omitempty"`
	Indexes        []bson.D `bson:"indexes"`
	UUID           string   `bson:"uuid,omitempty"`
	CollectionName string   `bson:"collectionName"`
	Type           string   `bson:"type,omitempty"`
}

func writeMetadata(ctx context.Context, db *mongo.Database, c collInfo, dir string) error {
	cur, err := db.Collection(c.Name).Indexes().List(ctx)
	if err != nil {
		return fmt.Errorf("dump: list indexes of %s: %w", c.Name, err)
	}
	m := metadata{Options: c.Options, Indexes: []bson.D{}, UUID: c.uuid(), CollectionName: c.Name, Type: "collection"}
	if err := cur.All(ctx, &m.Indexes); err != nil {
		return fmt.Errorf("dump: list indexes of %s: %w", c.Name, err)
	}
	// Canonical Extended JSON, as mongodump writes it: every number keeps its BSON type.
	b, err := bson.MarshalExtJSON(m, true, false)
	if err != nil {
		return fmt.Errorf("dump: metadata of %s: %w", c.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, c.Name+".metadata.json"), b, 0o640); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// dumpCollection writes every document of coll as of at to path and returns how many.
func dumpCollection(ctx context.Context, client *mongo.Client, coll *mongo.Collection, at bson.Timestamp, path string, o BackupOptions) (int64, error) {
	sess, err := client.StartSession(options.Session().SetSnapshot(true).SetSnapshotTime(at))
	if err != nil {
		return 0, fmt.Errorf("dump: snapshot session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return 0, fmt.Errorf("dump: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	start, last := time.Now(), time.Now()
	err = func() error {
		cur, err := coll.Find(mongo.NewSessionContext(ctx, sess), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return err
		}
		defer cur.Close(context.WithoutCancel(ctx))
		for cur.Next(ctx) {
			if _, err := w.Write(cur.Current); err != nil {
				return err
			}
			n++
			if time.Since(last) >= o.ProgressEvery {
				last = time.Now()
				progress(o.Progress, "  %s: %d documents, %.0f documents/s", coll.Name(), n, rate(n, time.Since(start)))
			}
		}
		return cur.Err()
	}()
	if err != nil {
		return 0, fmt.Errorf("dump: read %s at cluster time %s: %w%s", coll.Name(), tsString(at), err, snapshotAdvice(err))
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("dump: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("dump: write %s: %w", path, err)
	}
	progress(o.Progress, "  %s: %d documents in %s (%.0f documents/s)", coll.Name(), n, time.Since(start).Round(time.Millisecond), rate(n, time.Since(start)))
	return n, nil
}

// snapshotAdvice explains SnapshotTooOld: the backup took longer than the server keeps
// snapshot history.
func snapshotAdvice(err error) string {
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeSnapshotTooOld) {
		return " (the backup outlived the server's snapshot history: raise minSnapshotHistoryWindowInSeconds above the backup's duration on the member it reads from, best a secondary or hidden member (readPreference=secondary in --mongo-uri) so the primary keeps its default; docs/operations.md \"MongoDB\")"
	}
	return ""
}

// shardKeys reads the database's sharded collections and their keys from the config database:
// config.collections on a mongos or config server, config.cache.collections on a shard. A
// plain replica set has neither, and the answer is empty.
func shardKeys(ctx context.Context, client *mongo.Client, database string) (map[string]bson.Raw, error) {
	out := map[string]bson.Raw{}
	prefix := database + "."
	for _, name := range []string{"collections", "cache.collections"} {
		cur, err := client.Database("config").Collection(name).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(prefix)}}}})
		if err != nil {
			return nil, fmt.Errorf("dump: read config.%s: %w", name, err)
		}
		var docs []struct {
			ID      string   `bson:"_id"`
			Key     bson.Raw `bson:"key"`
			Dropped bool     `bson:"dropped"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("dump: read config.%s: %w", name, err)
		}
		for _, d := range docs {
			if !d.Dropped && d.Key != nil {
				out[strings.TrimPrefix(d.ID, prefix)] = d.Key
			}
		}
		if len(out) > 0 {
			break
		}
	}
	return out, nil
}

// tsString renders a timestamp as "t,i".
func tsString(ts bson.Timestamp) string {
	return strconv.FormatUint(uint64(ts.T), 10) + "," + strconv.FormatUint(uint64(ts.I), 10)
}

// ParseTimestamp reads "t,i" (the manifest's cluster_time) back.
func ParseTimestamp(s string) (bson.Timestamp, error) {
	t, i, ok := strings.Cut(s, ",")
	tt, err1 := strconv.ParseUint(strings.TrimSpace(t), 10, 32)
	ii, err2 := strconv.ParseUint(strings.TrimSpace(i), 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return bson.Timestamp{}, fmt.Errorf("dump: cluster time %q: want seconds,increment (e.g. 1764331200,7)", s)
	}
	return bson.Timestamp{T: uint32(tt), I: uint32(ii)}, nil
}

// tsTime is a cluster time's wall-clock second.
func tsTime(ts bson.Timestamp) time.Time { return time.Unix(int64(ts.T), 0).UTC() }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func progress(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", a...)
	}
}
