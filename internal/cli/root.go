// Package cli is shardmart's command tree: one file per verb, each with a newCmdX constructor
// taking injected IO and a run function (nil: the real one) that tests replace, so a command's
// flags and environment can be checked without a cluster. Errors return to a single exit in main.
package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// IO is where commands read and write, injected so tests can capture it.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// NewRootCmd builds the whole command tree.
func NewRootCmd(stdio IO) *cobra.Command {
	root := newRootCmd(stdio)
	root.AddCommand(
		newCmdVersion(stdio),
		newCmdServe(stdio, nil),
		newCmdSeed(stdio, nil),
		newCmdCassandra(stdio),
		newCmdMongo(stdio),
		newCmdAdvise(stdio, nil),
		newCmdBench(stdio, nil),
		newCmdMonitor(stdio, nil),
		newCmdMigrate(stdio),
		newCmdBackup(stdio),
		newCmdRestore(stdio),
	)
	return root
}

// newRootCmd is the root without subcommands: tests hang one command with a stub run
// function under it and get the same environment handling as the real tree.
func newRootCmd(stdio IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "shardmart",
		Short:         "E-commerce data platform: embedded store, MongoDB sharding, Cassandra, shard-key tools",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runs for every subcommand (none has its own hook), after flags are parsed.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return applyEnv(cmd) },
	}
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	return root
}
