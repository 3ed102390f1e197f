package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoBalancerOptions are the settings of `mongo balancer status|start|stop`.
type mongoBalancerOptions struct {
	Cluster mongoClusterOptions
	Action  string        // status, start or stop
	Wait    time.Duration // stop: how long a running round may take
	Poll    time.Duration // stop: balancerStatus polling interval
}

func newCmdMongoBalancer(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoBalancerOptions) error) *cobra.Command {
	var o mongoBalancerOptions
	cmd := &cobra.Command{Use: "balancer", Short: "Balancer status, start, stop (stop waits for the running round)"}
	action := func(name, short string) *cobra.Command {
		return &cobra.Command{
			Use: name, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				o.Cluster, o.Action = *cl, name
				return runOrRunF(cmd.Context(), stdio, o, mongoBalancer, runF)
			},
		}
	}
	stop := action("stop", "Disable the balancer and wait until no balancing round (chunk move) is running")
	stop.Flags().DurationVar(&o.Wait, "wait", 5*time.Minute, "how long to wait for a running round to finish")
	stop.Flags().DurationVar(&o.Poll, "poll", 2*time.Second, "balancerStatus polling interval")
	cmd.AddCommand(
		action("status", "Balancer mode and round, and auto-split per server version"),
		action("start", "Enable the balancer (balancerStart)"),
		stop,
	)
	return cmd
}

func mongoBalancer(ctx context.Context, stdio IO, o mongoBalancerOptions) error {
	extra := time.Duration(0)
	if o.Action == "stop" {
		extra = o.Wait // the wait comes on top of --timeout
	}
	return o.Cluster.withMongo(ctx, extra, func(ctx context.Context, admin sharding.DriverAdmin) error {
		switch o.Action {
		case "stop":
			fmt.Fprintln(stdio.Out, sharding.Shell("admin", sharding.BalancerStopCmd(o.Wait)))
			_, err := sharding.StopBalancer(ctx, admin, o.Wait, o.Poll, stdio.Out)
			return err
		case "start":
			if err := sharding.RunLogged(ctx, admin, stdio.Out, sharding.BalancerStartCmd()); err != nil {
				return err
			}
			st, err := sharding.GetBalancerStatus(ctx, admin)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "balancer: %s\n", st)
			return nil
		}
		st, err := sharding.GetBalancerStatus(ctx, admin)
		if err != nil {
			return err
		}
		as, err := sharding.GetAutoSplit(ctx, admin)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdio.Out, "balancer: %s\n", st)
		if as.NoOp {
			fmt.Fprintf(stdio.Out, "auto-split: no-op on %s (%s)\n", as.Version, as.Note)
		} else {
			fmt.Fprintf(stdio.Out, "auto-split: enabled=%t on %s (%s)\n", as.Enabled, as.Version, as.Note)
		}
		return nil
	})
}
