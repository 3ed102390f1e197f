package cli

import "github.com/spf13/cobra"

// newSeedCmd is a placeholder until its issue lands; it is not wired to anything yet.
func newSeedCmd(_ IO) *cobra.Command {
	return &cobra.Command{Use: "seed", Short: "(not yet implemented)", Hidden: true}
}
