package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/mongomove"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// `migrate --to mongo --family orders`: the orders family (with the catalog, which on MongoDB
// is the products collection itself) moves from the embedded store behind a short write
// freeze (internal/mongomove). The verbs keep their meaning: run freezes, copies and
// verifies; verify compares again; cutover records the move (then serve restarts with
// mongomove.Placement); cutover --rollback abandons a move that is not cut over; status
// shows the recorded state; plan estimates the freeze.

// freezeCopyRate is the rows per second a plan assumes for the freeze's copy when this store
// has not measured one: the demo shop with 9,874 orders copied into a 3-member replica set
// on a heavily loaded 2-vCPU machine (docs/migration.md, "Moving to MongoDB").
const freezeCopyRate = 2_400

// verifyShare is verify's time as a share of the copy's (it reads both sides back; measured
// with the copy above), and restartAllowance what serve's restart on MongoDB adds.
const (
	verifyShare      = 0.5
	restartAllowance = time.Second
)

// freezeMove tells whether the verb is about the move of the orders family to MongoDB (behind
// a write freeze) rather than a dual-write migration: --to mongo with orders or the catalog
// among the families.
func (o migrateStores) freezeMove() bool {
	if !o.toMongo() {
		return false
	}
	for _, f := range strings.Split(o.Families, ",") {
		if n := family.Name(strings.TrimSpace(f)); n == family.Orders || n == family.Catalog {
			return true
		}
	}
	return false
}

// mongoMoveFamilies checks --family for a move to MongoDB: the orders family, with or
// without the catalog, which moves with it.
func (o migrateStores) mongoMoveFamilies() error {
	if o.From != migrate.FromSQLite {
		return fmt.Errorf("--to mongo moves from the embedded store (--from sqlite), not --from %s", o.From)
	}
	orders := false
	for _, f := range strings.Split(o.Families, ",") {
		switch family.Name(strings.TrimSpace(f)) {
		case family.Orders:
			orders = true
		case family.Catalog:
		default:
			return fmt.Errorf("--to mongo --family %q: the orders family (orders, products with stock, users, idempotency keys, the outbox; the catalog moves with it) moves on its own, behind a write freeze; sessions, carts, history and events move with dual writes (--family sessions,carts,history,events)", o.Families)
		}
	}
	if !orders {
		return errors.New("--to mongo: on MongoDB the catalog is the products collection, so it moves with the orders family: --family orders")
	}
	return nil
}

// openMover opens the embedded store and MongoDB for a move.
func (o migrateStores) openMover(ctx context.Context, stdio IO) (*mongomove.Mover, func(), error) {
	if err := o.mongoMoveFamilies(); err != nil {
		return nil, nil, err
	}
	if o.Backend.mongoURI == "" {
		return nil, nil, errors.New("--to mongo needs --mongo-uri (a replica set or a mongos)")
	}
	src, err := sqlitestore.Open(ctx, o.Backend.sqlitePath())
	if err != nil {
		return nil, nil, err
	}
	dst, err := mongostore.Open(ctx, mongostore.Options{URI: o.Backend.mongoURI, Database: o.Backend.mongoDB})
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	closeAll := func() { _ = errors.Join(dst.Close(), src.Close()) }
	return &mongomove.Mover{Src: src, Dst: dst, Progress: stdio.Err}, closeAll, nil
}

func migrateMongoRun(ctx context.Context, stdio IO, o migrateStores, maxRate float64) error {
	m, done, err := o.openMover(ctx, stdio)
	if err != nil {
		return err
	}
	defer done()
	m.MaxRate = maxRate
	s, _, err := m.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "orders: copied and verified (run %s): %s in %s, %.0f rows/s; writes frozen since %s (%s ago).\nNext: shardmart migrate cutover --to mongo --family orders, then restart serve with --placement %s --mongo-uri ...\n",
		s.Run, rowsLine(s), s.CopyTime.Round(time.Millisecond), s.RowsPerSec(), s.FrozenAt.Format(time.RFC3339Nano),
		time.Since(s.FrozenAt).Round(time.Millisecond), mongomove.Placement)
	return nil
}

func rowsLine(s mongomove.State) string {
	parts := make([]string, 0, len(s.Rows))
	for _, k := range []string{"products", "users", "orders", "cart_fences", "outbox"} {
		parts = append(parts, fmt.Sprintf("%d %s", s.Rows[k], k))
	}
	return strings.Join(parts, ", ")
}

func migrateMongoVerify(ctx context.Context, stdio IO, o migrateStores) error {
	m, done, err := o.openMover(ctx, stdio)
	if err != nil {
		return err
	}
	defer done()
	rep, err := m.Verify(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "orders: %d collections equal on both sides\n", len(rep.Collections))
	return nil
}

func migrateMongoCutover(ctx context.Context, stdio IO, o migrateStores, rollback bool) error {
	m, done, err := o.openMover(ctx, stdio)
	if err != nil {
		return err
	}
	defer done()
	if rollback {
		if _, err := m.Rollback(ctx); err != nil {
			return err
		}
		fmt.Fprintln(stdio.Out, "orders: rolled back: the copy in MongoDB is cleared and the embedded store takes the family's writes again")
		return nil
	}
	s, err := m.Cutover(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "orders: cut over to MongoDB database %s at %s. Restart serve with --placement %s --mongo-uri ... --mongo-db %s: until then the family's writes answer 503 (frozen since %s).\n",
		s.Database, s.CutOverAt.Format(time.RFC3339Nano), mongomove.Placement, s.Database, s.FrozenAt.Format(time.RFC3339Nano))
	return nil
}

func migrateMongoStatus(ctx context.Context, stdio IO, o migrateStores) error {
	src, err := sqlitestore.Open(ctx, o.Backend.sqlitePath())
	if err != nil {
		return err
	}
	defer src.Close()
	m := &mongomove.Mover{Src: src}
	s, err := m.Load(ctx)
	if err != nil {
		return err
	}
	since, frozen, err := src.FrozenSince(ctx, string(family.Orders))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tPHASE\tRUN\tDATABASE\tFROZEN SINCE\tSTEPS COPIED\tROWS\tRESUMES")
	fz := "-"
	if frozen {
		fz = since.Format(time.RFC3339Nano)
	}
	rows := "-"
	if s.Rows != nil {
		rows = rowsLine(s)
	}
	fmt.Fprintf(tw, "orders\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", dash(s.Phase), dash(s.Run), dash(s.Database), fz,
		dash(strings.Join(s.Done, ",")), rows, s.Resumes)
	return tw.Flush()
}

// migrateMongoPlan prints every family's method and estimated time for a move to MongoDB,
// and the orders family's freeze: its rows at the copy rate measured by this store's last
// move, else the documented one, plus verify and serve's restart.
func migrateMongoPlan(ctx context.Context, stdio IO, o migrateStores) error {
	src, err := sqlitestore.Open(ctx, o.Backend.sqlitePath())
	if err != nil {
		return err
	}
	defer src.Close()
	snap, err := src.ReadSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	count := func(tables ...string) (int64, error) {
		var n int64
		for _, t := range tables {
			c, err := snap.Count(ctx, t)
			if err != nil {
				return 0, err
			}
			n += c
		}
		return n, nil
	}
	rate, rateFrom := float64(freezeCopyRate), "the documented rate (docs/migration.md)"
	if s, err := (&mongomove.Mover{Src: src}).Load(ctx); err == nil && s.RowsPerSec() > 0 {
		rate, rateFrom = s.RowsPerSec(), "this store's last move (run "+s.Run+")"
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tROWS\tMETHOD\tESTIMATE\tWRITES")
	var freeze time.Duration
	for _, spec := range family.Specs {
		switch spec.Name {
		case family.Orders:
			n, err := count("products", "users", "orders", "cart_fences")
			if err != nil {
				return err
			}
			freeze = time.Duration(float64(n)/rate*(1+verifyShare)*float64(time.Second)) + restartAllowance
			fmt.Fprintf(tw, "orders\t%d\tfreeze (migrate run --to mongo --family orders)\t%s\t503 + Retry-After for %s\n", n, freeze.Round(100*time.Millisecond), freeze.Round(100*time.Millisecond))
		case family.Catalog:
			fmt.Fprintln(tw, "catalog\t-\tmoves with orders (on MongoDB the catalog is the products collection)\t-\twith orders")
		default:
			table := map[family.Name]string{family.History: "order_history"}[spec.Name]
			if table == "" {
				table = string(spec.Name)
			}
			n, err := count(table)
			if err != nil {
				return err
			}
			est := time.Duration(float64(n) / spec.MongoCopyRate * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(tw, "%s\t%d\tdual-write + backfill (migrate run --to mongo --family %s)\t~%s\tnone (dual writes)\n", spec.Name, n, spec.Name, est)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "\nThe orders family's writes stop for about %s: its rows copied at %.0f rows/s (%s), verify (half the copy's time) and %s for serve's restart;\n"+
		"outbox messages not yet projected add to it. Dual-write estimates use each family's backfill rate into Cassandra (docs/benchmarks.md) as an approximation.\n",
		freeze.Round(100*time.Millisecond), rate, rateFrom, restartAllowance)
	return nil
}
