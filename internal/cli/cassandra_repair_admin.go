package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/repair"
)

// newCmdCassandraRepairStatus is `cassandra repair status`: the newest runs, their segments
// by state, and who holds the lease.
func newCmdCassandraRepairStatus(stdio IO, rt *repairTarget, cl *cassandraClusterOptions) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The newest repair runs, their segments by state, and the lease holder",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt.Cluster = *cl
			return withRepairStore(cmd.Context(), stdio, *rt, func(ctx context.Context, st *repair.Store) error {
				l, held, err := st.Lease(ctx)
				if err != nil {
					return err
				}
				if held {
					fmt.Fprintf(stdio.Out, "lease: held by %s on %s (pid %d) since %s\n", l.Holder, l.Host, l.PID, l.Since.UTC().Format(time.RFC3339))
				} else {
					fmt.Fprintln(stdio.Out, "lease: free")
				}
				ps, err := st.Status(ctx, limit)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "RUN\tKEYSPACE\tTABLES\tSTATE\tSEGMENTS\tATTEMPTS\tCREATED\tFINISHED")
				for _, p := range ps {
					fin := "-"
					if !p.Run.Finished.IsZero() {
						fin = p.Run.Finished.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Run.ID, p.Run.Keyspace, strings.Join(p.Run.Tables, ","),
						p.Run.State, byState(p.ByState, p.Run.Segments), p.Attempts, p.Run.Created.UTC().Format(time.RFC3339), fin)
				}
				return w.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 10, "newest runs shown")
	return cmd
}

// byState is "4/6 done, 1 running, 1 pending".
func byState(m map[string]int, total int) string {
	parts := []string{fmt.Sprintf("%d/%d done", m[repair.SegDone], total)}
	var rest []string
	for s := range m {
		if s != repair.SegDone {
			rest = append(rest, s)
		}
	}
	sort.Strings(rest)
	for _, s := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
	}
	return strings.Join(parts, ", ")
}

// newCmdCassandraRepairControl is `cassandra repair pause|resume|abort --run ID`: a state change
// the running repairer reads within seconds.
func newCmdCassandraRepairControl(stdio IO, rt *repairTarget, cl *cassandraClusterOptions, verb, short string) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   verb + " --run ID",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return fmt.Errorf("--run is required (the run ids are in `shardmart cassandra repair status`)")
			}
			rt.Cluster = *cl
			return withRepairStore(cmd.Context(), stdio, *rt, func(ctx context.Context, st *repair.Store) error {
				change := map[string]func(context.Context, string) error{"pause": st.Pause, "resume": st.Resume, "abort": st.Abort}[verb]
				if err := change(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(stdio.Out, "run %s: %s asked; the repairer applies it within seconds\n", id, verb)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&id, "run", "", "run id")
	return cmd
}

func withRepairStore(ctx context.Context, stdio IO, rt repairTarget, fn func(context.Context, *repair.Store) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	local, err := rt.local(stdio)
	if err != nil {
		return err
	}
	s, err := rt.session(ctx, local)
	if err != nil {
		return err
	}
	defer s.Close()
	st := repair.NewStore(s, rt.stateKeyspace())
	if err := st.EnsureTables(ctx); err != nil {
		return err
	}
	return fn(ctx, st)
}
