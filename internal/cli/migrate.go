package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
)

// migrateFlags are the flags every `migrate` verb accepts (persistent on the group); each verb
// copies what it uses into its own options.
type migrateFlags struct {
	stores   migrateStores
	run      string
	workers  int
	ranges   int
	progress string
	// writersWait bounds how long run and cutover wait for the shop processes to apply a phase.
	writersWait time.Duration
}

// migrateStores locate the old store, Cassandra and the families a verb works on.
type migrateStores struct {
	Backend  backendFlags
	Families string // comma-separated, or "all"
	From, To string
}

// newCmdMigrate builds `migrate` and its verbs (MIG-1, docs/migration.md), one file each.
func newCmdMigrate(stdio IO) *cobra.Command {
	fl := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move data families (sessions, carts, history, events, catalog) from the embedded store or MongoDB to Cassandra with the shop running",
		Long: `Move a data family to Cassandra without losing a row while the shop keeps taking writes:

  plan     row counts, estimated time, the placement change
  run      dual writes on (every shop process runs serve --migrations), then a parallel,
           checkpointed, resumable backfill by key range
  verify   counts and per-range checksums on both sides; the differing keys; non-zero exit on any
  cutover  serve the family from Cassandra (needs a passing verify); --rollback goes back
  status   where each family stands

The old store's location comes from the usual flags (--data-dir, --mongo-uri), Cassandra's from
--cassandra-hosts and --cassandra-keyspace (schema applied with "shardmart cassandra schema apply").
With --to mongo, sessions, carts, history and events move from the embedded store to MongoDB
(--mongo-uri, --mongo-db; every shop process runs serve --migrations --migrations-to mongo).`,
	}
	pf := cmd.PersistentFlags()
	fl.stores.Backend.registerStores(pf)
	pf.StringVar(&fl.stores.Families, "family", "", "families, comma-separated: sessions, carts, history, events, catalog, or all")
	pf.StringVar(&fl.stores.From, "from", migrate.FromSQLite, "the old store: sqlite (the embedded store under --data-dir) or mongo (--mongo-uri)")
	pf.StringVar(&fl.stores.To, "to", placement.Cassandra, "the new store: cassandra, or mongo (--mongo-uri, --mongo-db): sessions, carts, history and events with dual writes; --family orders (orders, products, users; the catalog moves with them) behind a short write freeze")
	pf.StringVar(&fl.run, "run", "", "run name for checkpoints (default: the family's current run, else \"1\"); a new name copies everything again")
	pf.IntVar(&fl.workers, "workers", 8, "ranges copied at once")
	pf.IntVar(&fl.ranges, "ranges", 256, "key ranges a new run is cut into (from the keys' quantiles)")
	pf.DurationVar(&fl.writersWait, "writers-wait", time.Minute, "how long run and cutover wait for every shop process to apply the new phase")
	pf.StringVar(&fl.progress, "progress", "auto", "progress output: bar (terminal), lines, or auto")
	cmd.AddCommand(
		newCmdMigratePlan(stdio, fl, nil),
		newCmdMigrateRun(stdio, fl, nil),
		newCmdMigrateVerify(stdio, fl, nil),
		newCmdMigrateCutover(stdio, fl, nil),
		newCmdMigrateStatus(stdio, fl, nil),
	)
	return cmd
}

// newCmdMigrateStoresVerb completes cmd, a verb whose options are the stores alone (plan,
// status), to run run, or runF if not nil (tests).
func newCmdMigrateStoresVerb(cmd *cobra.Command, fl *migrateFlags, run, runF func(context.Context, migrateStores) error) *cobra.Command {
	if runF != nil {
		run = runF
	}
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error { return run(c.Context(), fl.stores) }
	return cmd
}

func (o migrateStores) families(all bool) ([]migrate.Family, error) {
	if o.Families == "" && !all {
		return nil, errors.New("--family is required: sessions, carts, history, events, catalog, or all")
	}
	if o.Families == "" || o.Families == "all" {
		return migrate.Families, nil
	}
	var out []migrate.Family
	for _, name := range strings.Split(o.Families, ",") {
		f, err := migrate.ParseFamily(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// locate is where the stores are, for migrate.Open.
func (o migrateStores) locate() (migrate.Stores, error) {
	conn, err := o.Backend.cassandraConn.connection()
	return migrate.Stores{From: o.From, SQLitePath: o.Backend.sqlitePath(), MongoURI: o.Backend.mongoURI, MongoDatabase: o.Backend.mongoDB,
		CassandraHosts: o.Backend.hosts(), Keyspace: o.Backend.cassandraKeyspace, CassandraConn: conn, EventRetention: o.Backend.eventRetention}, err
}

// open checks the arguments, then opens the old store and Cassandra (migrate.Open), and
// returns the families to work on (every family with all and no --family).
func (o migrateStores) open(ctx context.Context, all bool) (*migrateEnv, []migrate.Family, error) {
	fams, err := o.families(all)
	if err != nil {
		return nil, nil, err
	}
	if o.toMongo() {
		return o.openMongo(ctx, fams)
	}
	if o.To != placement.Cassandra {
		return nil, nil, fmt.Errorf("--to %q: want cassandra or mongo", o.To)
	}
	if o.From != migrate.FromSQLite && o.From != migrate.FromMongo {
		return nil, nil, fmt.Errorf("--from %q: want sqlite or mongo", o.From)
	}
	stores, err := o.locate()
	if err != nil {
		return nil, nil, err
	}
	env, err := migrate.Open(ctx, stores)
	if errors.Is(err, migrate.ErrNoMongoURI) {
		return nil, nil, errors.New("--from mongo needs --mongo-uri")
	}
	if err != nil {
		return nil, nil, err
	}
	return &migrateEnv{Src: env.Src, Dst: env.Dst, Close: env.Close}, fams, nil
}

// waitWriters waits up to d for the shop processes to apply one of want to f and says who
// they are.
func waitWriters(ctx context.Context, stdio IO, dst migrationTarget, d time.Duration, f migrate.Family, want ...migrate.Phase) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ws, err := dst.WaitWriters(ctx, f, 500*time.Millisecond, want...)
	if err != nil {
		return err
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	fmt.Fprintf(stdio.Err, "%s: %d shop process(es) apply %s: %s\n", f, len(ws), want[0], strings.Join(ids, ", "))
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
