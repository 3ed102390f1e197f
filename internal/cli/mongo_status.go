package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

func newMongoStatusCmd(stdio IO) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each member of the local replica set: address, state, server version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := launcher.Open(dir, nil)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "SET %s\t\t\t\n", s.Name())
			fmt.Fprintln(tw, "MEMBER\tHOST\tSTATE\tVERSION")
			for _, st := range s.Status(ctx) {
				v := st.Version
				if v == "" {
					v = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", st.Index, st.Host, st.State, v)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(stdio.Out, s.URI())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultMongoDir, "set directory given to `mongo up`")
	return cmd
}
