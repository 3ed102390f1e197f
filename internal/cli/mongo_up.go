package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// mongoUpOptions are `mongo up`'s settings.
type mongoUpOptions struct {
	Dir   string
	Nodes int
	Port  int
	Name  string
}

func newCmdMongoUp(stdio IO, runF func(context.Context, mongoUpOptions) error) *cobra.Command {
	var o mongoUpOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local replica set on 127.0.0.1 (real mongod " + launcher.DefaultVersion + "); prints its URI last",
		Long: `Starts a replica set of 1 or 3 members on 127.0.0.1 (ports --port, --port+1, …), each
with its own data directory under --dir and a 0.25 GB WiredTiger cache, waits for a PRIMARY,
and prints the connection string as the last line of standard output, for
serve --mongo-uri. The mongods keep running after the command; stop them with
'shardmart mongo down'. This is a replica set, not a sharded cluster: there is no mongos.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes != 1 && o.Nodes != 3 {
				return fmt.Errorf("--nodes %d: want 1 or 3", o.Nodes)
			}
			if o.Port < 1024 || o.Port > 65535-o.Nodes {
				return fmt.Errorf("--port %d: want 1024 to %d", o.Port, 65535-o.Nodes)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return mongoUp(cmd.Context(), stdio, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", defaultMongoDir, "set directory: per-member data, logs, pidfiles")
	f.IntVar(&o.Nodes, "nodes", 1, "replica set members: 1 or 3")
	f.IntVar(&o.Port, "port", launcher.UserPort, "port of member 0; member N listens on port+N")
	f.StringVar(&o.Name, "set", "rs0", "replica set name")
	return cmd
}

func mongoUp(ctx context.Context, stdio IO, o mongoUpOptions) error {
	log := slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if prev, err := launcher.Open(o.Dir, nil); err == nil {
		for i := range prev.Members() {
			if prev.Running(i) && (len(prev.Members()) != o.Nodes || prev.Name() != o.Name) {
				return fmt.Errorf("a %d-member set %s is running in %s: run `shardmart mongo down` first", len(prev.Members()), prev.Name(), o.Dir)
			}
		}
	} else if !errors.Is(err, launcher.ErrNoSet) {
		return err
	}
	s, err := launcher.New(launcher.Options{Dir: o.Dir, Name: o.Name, Members: o.Nodes, BasePort: o.Port, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(stdio.Err, "starting mongod %s replica set %s (%d member(s)) in %s\n", launcher.DefaultVersion, o.Name, o.Nodes, o.Dir)
	if err := s.Up(ctx); err != nil {
		return err
	}
	for _, st := range s.Status(ctx) {
		fmt.Fprintf(stdio.Out, "  member %d %s %s\n", st.Index, st.Host, st.State)
	}
	fmt.Fprintf(stdio.Out, "replica set %s up in %s (no mongos: a replica set, not a sharded cluster; stop with: shardmart mongo down)\n",
		o.Name, time.Since(start).Round(100*time.Millisecond))
	fmt.Fprintln(stdio.Out, s.URI())
	return nil
}
