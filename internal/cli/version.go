package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/shardmart/shardmart/internal/cli.Version=...".
var Version = "dev"

func newCmdVersion(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the shardmart version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						rev = " (" + s.Value + ")"
					}
				}
				fmt.Fprintf(stdio.Out, "shardmart %s%s %s\n", Version, rev, bi.GoVersion)
				return nil
			}
			fmt.Fprintf(stdio.Out, "shardmart %s\n", Version)
			return nil
		},
	}
}
