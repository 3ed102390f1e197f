package cli

import "github.com/spf13/cobra"

// newMongoCmd is a placeholder until its issue lands; it is not wired to anything yet.
func newMongoCmd(_ IO) *cobra.Command {
	return &cobra.Command{Use: "mongo", Short: "(not yet implemented)", Hidden: true}
}
