package cli

import "github.com/spf13/cobra"

// newServeCmd is a placeholder until its issue lands; it is not wired to anything yet.
func newServeCmd(_ IO) *cobra.Command {
	return &cobra.Command{Use: "serve", Short: "(not yet implemented)", Hidden: true}
}
