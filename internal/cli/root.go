// Package cli is shardmart's command tree: one file per subcommand, each with a
// newXCmd constructor taking injected IO, returning errors to a single exit in main.
package cli

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// IO is where commands read and write, injected so tests can capture it.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// NewRootCmd builds the whole command tree.
func NewRootCmd(stdio IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "shardmart",
		Short:         "E-commerce data platform: embedded store, MongoDB sharding, Cassandra, shard-key tools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	root.AddCommand(
		newVersionCmd(stdio),
		newServeCmd(stdio),
		newSeedCmd(stdio),
		newCassandraCmd(stdio),
		newMongoCmd(stdio),
		newAdviseCmd(stdio),
		newBenchCmd(stdio),
	)
	return root
}

// bindEnv lets every flag of cmd be set by SHARDMART_<FLAG_NAME> (dashes become
// underscores); an explicit flag wins over the environment.
func bindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "SHARDMART_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = &envError{name: name, err: e}
			}
			f.Changed = true
		}
	})
	return err
}

type envError struct {
	name string
	err  error
}

func (e *envError) Error() string { return "environment " + e.name + ": " + e.err.Error() }
func (e *envError) Unwrap() error { return e.err }
