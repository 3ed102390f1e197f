package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// cassandraRepairOptions are `cassandra repair`'s settings.
type cassandraRepairOptions struct {
	Cluster     cassandraClusterOptions
	Keyspace    string
	Tables      []string
	Skip        []string
	Incremental bool
	Schedule    string // cron; empty: once
}

func newCmdCassandraRepair(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraRepairOptions) error) *cobra.Command {
	var o cassandraRepairOptions
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
			o.Cluster = *cl
			if o.Schedule != "" {
				if _, err := cron.ParseStandard(o.Schedule); err != nil {
					return fmt.Errorf("--schedule %q: %w", o.Schedule, err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return cassandraRepair(cmd.Context(), stdio, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Keyspace, "keyspace", "shardmart", "keyspace to repair")
	f.StringSliceVar(&o.Tables, "tables", nil, "tables to repair (default: all of the keyspace except --skip)")
	f.StringSliceVar(&o.Skip, "skip", launcher.DefaultRepairSkip, "table name patterns left out when --tables is empty")
	f.BoolVar(&o.Incremental, "incremental", false, "incremental repair instead of full")
	f.StringVar(&o.Schedule, "schedule", "", `cron schedule, e.g. "0 3 * * *"; empty runs once`)
	return cmd
}

func cassandraRepair(ctx context.Context, stdio IO, o cassandraRepairOptions) error {
	c, err := o.Cluster.open(stdio)
	if err != nil {
		return err
	}
	log := cassandraLogger(stdio)
	opts := launcher.RepairOptions{Keyspace: o.Keyspace, Tables: o.Tables, Skip: o.Skip, Incremental: o.Incremental}
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
		fmt.Fprintf(stdio.Out, "repaired %s.{%s} in %s\n", o.Keyspace, strings.Join(done, ","), time.Since(start).Round(time.Second))
		return nil
	}
	if o.Schedule == "" {
		return run(ctx)
	}
	sched := cron.New(cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	if _, err := sched.AddFunc(o.Schedule, func() {
		if err := run(ctx); err != nil {
			log.Error("scheduled repair failed", "err", err)
		}
	}); err != nil {
		return fmt.Errorf("--schedule %q: %w", o.Schedule, err)
	}
	log.Info("repair scheduled", "schedule", o.Schedule, "keyspace", o.Keyspace)
	sched.Start()
	<-ctx.Done()
	<-sched.Stop().Done() // let a running repair finish its nodetool call or be cancelled
	return nil
}
