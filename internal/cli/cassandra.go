package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// defaultCassandraDir sits under ./data, which git ignores, next to the embedded store.
const defaultCassandraDir = "data/cassandra"

// newCassandraCmd groups the local Cassandra cluster commands.
func newCassandraCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cassandra",
		Short: "Local Apache Cassandra cluster (up, down, status, repair, nodetool) and the schema",
	}
	cmd.PersistentFlags().String("cassandra-dir", defaultCassandraDir, "cluster directory: per-node config, data, logs, pidfiles")
	cmd.AddCommand(
		newCassandraUpCmd(stdio),
		newCassandraDownCmd(stdio),
		newCassandraStatusCmd(stdio),
		newCassandraRepairCmd(stdio),
		newCassandraNodetoolCmd(stdio),
		newCassandraFetchCmd(stdio),
		newCassandraSchemaCmd(stdio),
	)
	return cmd
}

func cassandraLogger(stdio IO) *slog.Logger {
	return slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// openCassandra binds the environment and opens the cluster that `up` wrote.
func openCassandra(cmd *cobra.Command, stdio IO) (*launcher.Cluster, error) {
	if err := bindEnv(cmd); err != nil {
		return nil, err
	}
	dir, _ := cmd.Flags().GetString("cassandra-dir")
	return launcher.Open(dir, cassandraLogger(stdio))
}

func newCassandraUpCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster (jars from Maven Central) and wait until every node sees the others",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			f := cmd.Flags()
			dir, _ := f.GetString("cassandra-dir")
			nodes, _ := f.GetInt("nodes")
			base, _ := f.GetString("base-addr")
			heap, _ := f.GetInt("heap-mb")
			if nodes != 1 && nodes != 3 {
				return fmt.Errorf("--nodes %d: want 1 or 3", nodes)
			}
			if prev, err := launcher.Open(dir, nil); err == nil && len(prev.Nodes()) != nodes {
				for i := range prev.Nodes() {
					if prev.Running(i) {
						return fmt.Errorf("a %d-node cluster is running in %s: run `shardmart cassandra down` first", len(prev.Nodes()), dir)
					}
				}
			}
			c, err := launcher.New(launcher.Options{Dir: dir, Nodes: nodes, BaseAddr: base, HeapMB: heap, Logger: cassandraLogger(stdio)})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Minute)
			defer cancel()
			start := time.Now()
			if err := c.Up(ctx); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "cassandra %s: %d node(s) up in %s\n", launcher.DefaultVersion, nodes, time.Since(start).Round(100*time.Millisecond))
			boot := c.BootTimes()
			for _, n := range c.Nodes() {
				if d, ok := boot[n.Index]; ok {
					fmt.Fprintf(stdio.Out, "  node%d %s:%d boot %s\n", n.Index+1, n.Addr, launcher.CQLPort, d.Round(100*time.Millisecond))
				}
			}
			fmt.Fprintf(stdio.Out, "contact points: %s (stop with: shardmart cassandra down)\n", strings.Join(c.Hosts(), ","))
			return nil
		},
	}
	cmd.Flags().Int("nodes", 1, "number of nodes: 1 or 3")
	cmd.Flags().String("base-addr", launcher.UserAddr, "address of node 1; node N listens on the next addresses")
	cmd.Flags().Int("heap-mb", 512, "JVM heap per node, MiB")
	return cmd
}

func newCassandraDownCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster (SIGTERM, then SIGKILL after a grace period)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCassandra(cmd, stdio)
			if errors.Is(err, launcher.ErrNoCluster) {
				fmt.Fprintln(stdio.Out, "no cluster to stop")
				return nil
			}
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Minute)
			defer cancel()
			if err := c.Down(ctx); err != nil {
				return err
			}
			fmt.Fprintln(stdio.Out, "cassandra stopped")
			return nil
		},
	}
}

func newCassandraStatusCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each node's process and the ring as the first running node sees it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := openCassandra(cmd, stdio)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tADDRESS\tJMX\tPROCESS\tDIR")
			first := -1
			for _, n := range c.Nodes() {
				state := "stopped"
				if c.Running(n.Index) {
					state = "running"
					if first < 0 {
						first = n.Index
					}
				}
				fmt.Fprintf(tw, "node%d\t%s:%d\t%d\t%s\t%s\n", n.Index+1, n.Addr, launcher.CQLPort, n.JMXPort, state, n.Dir)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if first < 0 {
				return nil
			}
			out, err := c.Nodetool(ctx, first, "status")
			if err != nil {
				return err
			}
			fmt.Fprint(stdio.Out, "\n"+out)
			return nil
		},
	}
}

func newCassandraRepairCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Anti-entropy repair (nodetool repair -pr on every node), once or on a cron schedule",
		Long: `Runs nodetool repair -pr on every node in turn for the keyspace's tables, so each token
range is repaired once. Without --tables it repairs every table of the keyspace except those
matching --skip: sessions and click events get no anti-entropy repair (short-lived data,
hinted handoff only). With --schedule it repairs on that cron schedule (5 fields, or
descriptors such as @daily) until interrupted; a run still going when the next is due is
skipped, not overlapped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			f := cmd.Flags()
			schedule, _ := f.GetString("schedule")
			if schedule != "" {
				if _, err := cron.ParseStandard(schedule); err != nil {
					return fmt.Errorf("--schedule %q: %w", schedule, err)
				}
			}
			c, err := openCassandra(cmd, stdio)
			if err != nil {
				return err
			}
			ks, _ := f.GetString("keyspace")
			tables, _ := f.GetStringSlice("tables")
			skip, _ := f.GetStringSlice("skip")
			incremental, _ := f.GetBool("incremental")
			log := cassandraLogger(stdio)
			opts := launcher.RepairOptions{Keyspace: ks, Tables: tables, Skip: skip, Incremental: incremental}
			run := func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				start := time.Now()
				done, err := c.Repair(ctx, opts)
				if errors.Is(err, launcher.ErrSingleReplica) {
					fmt.Fprintf(stdio.Out, "%v: nothing repaired\n", err)
					return nil
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(stdio.Out, "repaired %s.{%s} in %s\n", ks, strings.Join(done, ","), time.Since(start).Round(time.Second))
				return nil
			}
			if schedule == "" {
				return run(cmd.Context())
			}
			sched := cron.New(cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
			if _, err := sched.AddFunc(schedule, func() {
				if err := run(cmd.Context()); err != nil {
					log.Error("scheduled repair failed", "err", err)
				}
			}); err != nil {
				return fmt.Errorf("--schedule %q: %w", schedule, err)
			}
			log.Info("repair scheduled", "schedule", schedule, "keyspace", ks)
			sched.Start()
			<-cmd.Context().Done()
			<-sched.Stop().Done() // let a running repair finish its nodetool call or be cancelled
			return nil
		},
	}
	cmd.Flags().String("keyspace", "shardmart", "keyspace to repair")
	cmd.Flags().StringSlice("tables", nil, "tables to repair (default: all of the keyspace except --skip)")
	cmd.Flags().StringSlice("skip", launcher.DefaultRepairSkip, "table name patterns left out when --tables is empty")
	cmd.Flags().Bool("incremental", false, "incremental repair instead of full")
	cmd.Flags().String("schedule", "", `cron schedule, e.g. "0 3 * * *"; empty runs once`)
	return cmd
}

func newCassandraFetchCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "fetch",
		Short: "Check Java 17 and Maven and download the Cassandra server jars into the cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			if err := launcher.CheckPrerequisites(ctx); err != nil {
				return err
			}
			lib, err := launcher.EnsureJars(ctx, launcher.DefaultCacheDir(), launcher.DefaultVersion)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "cassandra %s jars in %s\n", launcher.DefaultVersion, lib)
			return nil
		},
	}
}

func newCassandraNodetoolCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodetool [--node N] -- ARGS...",
		Short: "Run nodetool against one node of the local cluster",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := openCassandra(cmd, stdio)
			if err != nil {
				return err
			}
			node, _ := cmd.Flags().GetInt("node")
			out, err := c.Nodetool(cmd.Context(), node-1, args...)
			fmt.Fprint(stdio.Out, out)
			return err
		},
	}
	cmd.Flags().Int("node", 1, "node number (1-based)")
	return cmd
}
