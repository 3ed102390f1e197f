package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoPlanOptions are `mongo plan`'s settings.
type mongoPlanOptions struct {
	Cluster      mongoClusterOptions
	FirehoseDay  string // YYYY-MM-DD; empty: today
	ListVariants bool
}

func newCmdMongoPlan(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoPlanOptions) error) *cobra.Command {
	var o mongoPlanOptions
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the mongosh commands apply would run on an empty cluster, and the shard-key rule findings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Cluster = *cl
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return mongoPlan(stdio, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.FirehoseDay, "firehose-day", "", "initial firehose boundary day, YYYY-MM-DD (default today, UTC)")
	f.BoolVar(&o.ListVariants, "list-variants", false, "list the selectable shard-key variants and exit")
	return cmd
}

func mongoPlan(stdio IO, o mongoPlanOptions) error {
	if o.ListVariants {
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "collection\tvariants (default first)")
		spec, err := sharding.NewSpec(sharding.Options{})
		if err != nil {
			return err
		}
		for _, c := range spec.Collections {
			fmt.Fprintf(tw, "%s\t%s\n", c.Name, strings.Join(sharding.Variants()[c.Name], ", "))
		}
		return tw.Flush()
	}
	now := time.Now()
	if o.FirehoseDay != "" {
		t, err := time.Parse(time.DateOnly, o.FirehoseDay)
		if err != nil {
			return fmt.Errorf("--firehose-day %q: want YYYY-MM-DD: %w", o.FirehoseDay, err)
		}
		now = t
	}
	spec, err := o.Cluster.spec(now)
	if err != nil {
		return err
	}
	findings := sharding.Check(spec)
	for _, f := range findings {
		fmt.Fprintf(stdio.Out, "// %s\n", f)
	}
	if len(findings) > 0 {
		fmt.Fprintln(stdio.Out)
	}
	if err := sharding.WritePlan(stdio.Out, spec, sharding.Plan(spec)); err != nil {
		return err
	}
	if errs := sharding.Errors(findings); len(errs) > 0 {
		return fmt.Errorf("%w: %d error(s) above; apply would refuse", sharding.ErrRules, len(errs))
	}
	return nil
}
