package cassandrastore

import (
	"context"
	"strings"
	"testing"
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
