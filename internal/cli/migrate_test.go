package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/migrate"
)

// Bad migrate arguments are refused before anything is opened, naming what is allowed.
func TestMigrateRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "run"}, "--family is required"},
		{[]string{"migrate", "run", "--family", "orders"}, "want one of sessions, carts, history, events, catalog"},
		{[]string{"migrate", "verify", "--family", "carts", "--to", "postgres"}, "want cassandra or mongo"},
		{[]string{"migrate", "run", "--family", "catalog", "--to", "mongo"}, "moves with the orders family"},
		{[]string{"migrate", "run", "--family", "carts", "--to", "mongo", "--from", "mongo"}, "moves the embedded store"},
		{[]string{"migrate", "run", "--family", "carts", "--to", "mongo"}, "--to mongo needs --mongo-uri"},
		{[]string{"migrate", "cutover", "--family", "carts", "--from", "postgres"}, "want sqlite or mongo"},
		{[]string{"migrate", "run", "--family", "carts", "--from", "mongo"}, "--from mongo needs --mongo-uri"},
	} {
		var out bytes.Buffer
		root := NewRootCmd(IO{Out: &out, Err: &out})
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// The progress of a backfill: a bar with rows/s and the time left when asked for (a terminal),
// plain lines with the same figures otherwise.
func TestMigrateProgress(t *testing.T) {
	for _, mode := range []string{"bar", "lines"} {
		var out bytes.Buffer
		o := &migrateRunOptions{Progress: mode}
		p := o.newProgress(IO{Err: &out}, migrate.Carts, 1000)
		p.update(migrate.Progress{Family: migrate.Carts, RangesDone: 1, Ranges: 4, Rows: 250, RowsPerSec: 500})
		p.update(migrate.Progress{Family: migrate.Carts, RangesDone: 4, Ranges: 4, Rows: 1000, RowsPerSec: 500})
		p.finish()
		got := out.String()
		switch mode {
		case "bar":
			if !strings.Contains(got, "rows/s") || !strings.Contains(got, "1000/1000") {
				t.Errorf("bar: %q", got)
			}
		case "lines":
			if !strings.Contains(got, "carts: ranges 1/4, rows 250/1000 (0 expired), 500 rows/s, eta 2s") ||
				!strings.Contains(got, "carts: ranges 4/4, rows 1000/1000") {
				t.Errorf("lines: %q", got)
			}
		}
	}
}

// plan and status run with the stores from the group's flags, and refuse arguments.
func TestMigrateStoresVerbs(t *testing.T) {
	fl := &migrateFlags{}
	var plan, status migrateStores
	group := &cobra.Command{Use: "migrate"}
	group.PersistentFlags().StringVar(&fl.stores.Families, "family", "", "")
	group.PersistentFlags().StringVar(&fl.stores.From, "from", "", "")
	group.AddCommand(
		newCmdMigratePlan(IO{}, fl, func(_ context.Context, s migrateStores) error { plan = s; return nil }),
		newCmdMigrateStatus(IO{}, fl, func(_ context.Context, s migrateStores) error { status = s; return nil }),
	)
	run := func(args ...string) error {
		group.SetArgs(args)
		group.SetOut(io.Discard)
		group.SetErr(io.Discard)
		return group.Execute()
	}
	if err := run("plan", "--family", "carts", "--from", "mongo"); err != nil || plan.Families != "carts" || plan.From != "mongo" {
		t.Errorf("plan: options %+v, %v; want carts from mongo", plan, err)
	}
	if err := run("status", "--family", "events"); err != nil || status.Families != "events" {
		t.Errorf("status: options %+v, %v; want events", status, err)
	}
	for _, verb := range []string{"plan", "status"} {
		if err := run(verb, "extra"); err == nil || !strings.Contains(err.Error(), "unknown command") && !strings.Contains(err.Error(), "accepts 0 arg") {
			t.Errorf("%s extra: %v, want an error refusing the argument", verb, err)
		}
	}
}
