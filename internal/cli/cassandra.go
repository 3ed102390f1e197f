package cli

import "github.com/spf13/cobra"

// newCassandraCmd is a placeholder until its issue lands; it is not wired to anything yet.
func newCassandraCmd(_ IO) *cobra.Command {
	return &cobra.Command{Use: "cassandra", Short: "(not yet implemented)", Hidden: true}
}
