package cassandrastore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestSchemaChecksumIgnoresComments(t *testing.T) {
	ms, err := upgrades()
	if err != nil {
		t.Fatal(err)
	}
	base := ms[0].text
	if !strings.Contains(base, "unit_price bigint -- cents") {
		t.Fatalf("0001 no longer holds the line this test edits: %q", "unit_price bigint -- cents")
	}
	want := statementsChecksum(base)
	for name, edited := range map[string]string{
		"comment reworded":      strings.Replace(base, "-- cents (money.Amount)", "-- in cents", 1),
		"comment line added":    "-- a new first line\n\n" + base,
		"comment at a line end": strings.Replace(base, "{{.KS}}.order_line (\n", "{{.KS}}.order_line ( -- an order's line\n", 1),
		"trailing blanks":       strings.ReplaceAll(base, ";\n", ";  \n\n"),
	} {
		if edited == base {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if got := statementsChecksum(edited); got != want {
			t.Errorf("%s: checksum %s, want %s (only comments changed)", name, got, want)
		}
	}
	for name, edited := range map[string]string{
		"column type":    strings.Replace(base, "unit_price bigint", "unit_price int", 1),
		"statement":      base + "\nALTER TABLE {{.KS}}.products ADD (weight int);\n",
		"table option":   strings.Replace(base, "gc_grace_seconds = 10800", "gc_grace_seconds = 10801", 1),
		"commented away": strings.Replace(base, "    unit_price bigint", "    -- unit_price bigint", 1),
	} {
		if edited == base {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if got := statementsChecksum(edited); got == want {
			t.Errorf("%s: checksum %s unchanged after a statement edit", name, got)
		}
	}
}

// A keyspace applied before comments were left out of the sum holds each file's byte sum: it
// still verifies while the statements are the same, and is refused once one is edited.
func TestSchemaVerifyAcceptsFileSumsOfSameStatements(t *testing.T) {
	ms, err := upgrades()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		f, ok := fileChecksums[m.version]
		if !ok {
			continue // an upgrade newer than byte sums was only ever recorded by its statements
		}
		if err := m.verify(m.checksum); err != nil {
			t.Errorf("%04d: its own checksum: %v", m.version, err)
		}
		if err := m.verify(f.file); err != nil {
			t.Errorf("%04d: the byte sum recorded before: %v", m.version, err)
		}
		edited := m
		edited.checksum = statementsChecksum(m.text + "\nALTER TABLE {{.KS}}.products ADD (weight int);\n")
		for _, recorded := range []string{m.checksum, f.file} {
			if err := edited.verify(recorded); err == nil || !strings.Contains(err.Error(), "edited after it was applied") {
				t.Errorf("%04d with an added statement, recorded %s: %v, want an edited-after-applied error", m.version, recorded, err)
			}
		}
		if err := m.verify("0123456789abcdef"); err == nil {
			t.Errorf("%04d: an unknown recorded sum verified", m.version)
		}
	}
}

// The same on the server: a keyspace recording the byte sum re-applies cleanly, one recording
// another sum is refused, and nothing is applied again in either case.
func TestSchemaApplyVerifiesRecordedSums(t *testing.T) {
	st := store(t)
	ctx := context.Background()
	var recorded string
	q := `SELECT checksum FROM ` + testKeyspace + `.schema_migrations WHERE version = 1`
	if err := st.Session().Query(q).WithContext(ctx).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	set := func(sum string) {
		t.Helper()
		if err := st.Session().Query(`UPDATE `+testKeyspace+`.schema_migrations SET checksum = ? WHERE version = 1`, sum).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { set(recorded) })

	set(fileChecksums[1].file)
	res, err := ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: testKeyspace, RF: 1})
	if err != nil || len(res.Applied) != 0 || res.Version != LatestVersion() {
		t.Errorf("apply over the byte sum of 0001: %+v, %v; want nothing applied and no error", res, err)
	}
	set("0123456789abcdef")
	res, err = ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: testKeyspace, RF: 1})
	if err == nil || !strings.Contains(err.Error(), "0001_base was edited after it was applied") || len(res.Applied) != 0 {
		t.Errorf("apply over another sum: %+v, %v; want an edited-after-applied error", res, err)
	}
}

// describe is what system_schema holds for keyspace ks: its tables with every option, their
// columns and its types, each row without the keyspace's name or the table's id.
func describe(t *testing.T, ctx context.Context, s *gocql.Session, ks string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, table := range []string{"tables", "columns", "types", "dropped_columns"} {
		rows, err := s.Query(`SELECT * FROM system_schema.`+table+` WHERE keyspace_name = ?`, ks).WithContext(ctx).Iter().SliceMap()
		if err != nil {
			t.Fatalf("read system_schema.%s of %s: %v", table, ks, err)
		}
		for _, r := range rows {
			delete(r, "keyspace_name")
			delete(r, "id")
		}
		sort.Slice(rows, func(i, j int) bool { return fmt.Sprint(rows[i]) < fmt.Sprint(rows[j]) })
		out[table] = rows
	}
	return out
}

// The baseline builds exactly what the upgrades build one by one, table options included, and
// records the same versions; an interrupted baseline run is finished by the next apply.
func TestSchemaBaselineEqualsUpgrades(t *testing.T) {
	st := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base, up := testKeyspace+"_baseline", testKeyspace+"_upgrades"
	t.Cleanup(func() {
		for _, ks := range []string{base, up} {
			_ = st.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
		}
	})
	b, err := newestBaseline()
	if err != nil || b.version == 0 {
		t.Fatalf("newest baseline: %+v, %v", b, err)
	}
	var upTo []int
	for v := 1; v <= b.version; v++ {
		upTo = append(upTo, v)
	}
	res, err := ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: base, RF: 1})
	if err != nil || res.Baseline != b.version || !slices.Equal(res.Applied, upTo) || res.Version != LatestVersion() {
		t.Fatalf("apply to an empty keyspace: %+v, %v; want baseline %d, versions %v applied", res, err, b.version, upTo)
	}
	res, err = ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: up, RF: 1, upgradesOnly: true})
	if err != nil || res.Baseline != 0 || len(res.Applied) != LatestVersion() {
		t.Fatalf("apply the upgrades one by one: %+v, %v", res, err)
	}
	same := func(when string) {
		t.Helper()
		got, want := describe(t, ctx, st.Session(), base), describe(t, ctx, st.Session(), up)
		if len(got["tables"]) != len(upgradesTables(t)) {
			t.Fatalf("%s: %d tables in %s, want %d", when, len(got["tables"]), base, len(upgradesTables(t)))
		}
		for k := range want {
			if only, missing := rowsApart(got[k], want[k]), rowsApart(want[k], got[k]); len(only)+len(missing) > 0 {
				t.Errorf("%s: system_schema.%s differs:\nonly the baseline's: %v\nonly the upgrades': %v", when, k, only, missing)
			}
		}
	}
	same("after the first apply")
	sums := func(ks string) map[int]string {
		t.Helper()
		m := map[int]string{}
		iter := st.Session().Query(`SELECT version, checksum FROM ` + ks + `.schema_migrations`).WithContext(ctx).Iter()
		var v int
		var sum string
		for iter.Scan(&v, &sum) {
			m[v] = sum
		}
		if err := iter.Close(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	recorded := sums(base)
	if recorded[baselineMarker] != b.checksum {
		t.Errorf("baseline marker %q, want %q", recorded[baselineMarker], b.checksum)
	}
	delete(recorded, baselineMarker)
	if want := sums(up); !reflect.DeepEqual(recorded, want) {
		t.Errorf("recorded versions %v, want those of the upgrades %v", recorded, want)
	}

	// Interrupted after a few statements: the marker is there, no version is, a table is not.
	versions := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(upTo)), ", "), "[]")
	for _, q := range []string{"DROP TABLE " + base + ".migration_writers", "DELETE FROM " + base + ".schema_migrations WHERE version IN (" + versions + ")"} {
		if err := st.Session().Query(q).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	res, err = ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: base, RF: 1})
	if err != nil || res.Baseline != b.version || !slices.Equal(res.Applied, upTo) {
		t.Fatalf("apply after an interrupted baseline: %+v, %v; want the baseline run again", res, err)
	}
	same("after an interrupted baseline was finished")
	res, err = ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: base, RF: 1})
	if err != nil || res.Baseline != 0 || len(res.Applied) != 0 || len(res.Altered) != 0 {
		t.Errorf("second apply: %+v, %v; want nothing done", res, err)
	}
}

// A keyspace where an earlier upgrade run left tables but recorded no version is never given
// the baseline: CREATE IF NOT EXISTS would leave those tables in their old shape.
func TestSchemaBaselineOnlyOnAnEmptyKeyspace(t *testing.T) {
	st := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ks := testKeyspace + "_half"
	t.Cleanup(func() { _ = st.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec() })
	for _, q := range []string{
		"CREATE KEYSPACE " + ks + " WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
		// 0001's shape of products: no description or active column yet.
		"CREATE TABLE " + ks + ".products (product_id text PRIMARY KEY, name text, category text, price bigint, attributes frozen<map<text, text>>, stock frozen<map<text, bigint>>, created_at timestamp, updated_at timestamp)",
	} {
		if err := st.Session().Query(q).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: ks, RF: 1})
	if err != nil || res.Baseline != 0 || len(res.Applied) != LatestVersion() {
		t.Fatalf("apply over a half-applied 0001: %+v, %v; want every upgrade, no baseline", res, err)
	}
	var n int
	if err := st.Session().Query(`SELECT count(*) FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'products' AND column_name = 'description'`, ks).
		WithContext(ctx).Scan(&n); err != nil || n != 1 {
		t.Errorf("products.description: %d columns, %v; want the column 0003 adds", n, err)
	}
}

// rowsApart are the rows of a that b does not hold.
func rowsApart(a, b []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range a {
		if !slices.ContainsFunc(b, func(o map[string]any) bool { return reflect.DeepEqual(r, o) }) {
			out = append(out, r)
		}
	}
	return out
}

// upgradesTables are the tables the upgrades create, schema_migrations included.
func upgradesTables(t *testing.T) []string {
	t.Helper()
	ms, err := upgrades()
	if err != nil {
		t.Fatal(err)
	}
	tables := []string{"schema_migrations"}
	for _, m := range ms {
		stmts, err := m.statements(SchemaOptions{Keyspace: "ks", SessionTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if f := strings.Fields(s); len(f) > 5 && f[0] == "CREATE" && f[1] == "TABLE" {
				tables = append(tables, f[5])
			}
		}
	}
	return tables
}
