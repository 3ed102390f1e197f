package cli

import "github.com/spf13/cobra"

// newAdviseCmd is a placeholder until its issue lands; it is not wired to anything yet.
func newAdviseCmd(_ IO) *cobra.Command {
	return &cobra.Command{Use: "advise", Short: "(not yet implemented)", Hidden: true}
}
