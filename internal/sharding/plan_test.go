package sharding

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// planDay fixes the firehose boundary so the golden plan is stable.
var planDay = time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)

func defaultSpec(t *testing.T) Spec {
	t.Helper()
	s, err := NewSpec(Options{Now: planDay})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanGolden(t *testing.T) {
	spec := defaultSpec(t)
	var buf bytes.Buffer
	if err := WritePlan(&buf, spec, Plan(spec)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/sharding -run TestPlanGolden -update)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("plan differs from %s (rerun with -update and review the diff)\ngot:\n%s", golden, got)
	}
}

func TestPlanOrderAndTargets(t *testing.T) {
	spec := defaultSpec(t)
	steps := Plan(spec)
	if steps[0].Action != ActEnableSharding {
		t.Fatalf("first step = %s, want enableSharding", steps[0].Action)
	}
	// Per collection: zone ranges, then indexes, then shardCollection last.
	last := map[string]Action{}
	for _, s := range steps[1:] {
		if s.NS == "" {
			continue
		}
		prev := last[s.NS]
		order := []Action{"", ActZoneRange, ActCreateIndex, ActShardCollection}
		if slices.Index(order, s.Action) < slices.Index(order, prev) {
			t.Errorf("%s: %s after %s", s.NS, s.Action, prev)
		}
		last[s.NS] = s.Action
		wantDB := "admin"
		if s.Action == ActCreateIndex {
			wantDB = "shardmart"
		}
		if s.DB != wantDB {
			t.Errorf("%s %s runs on %q, want %q", s.NS, s.Action, s.DB, wantDB)
		}
	}
	for _, c := range []string{"orders", "products", "carts", "sessions", "events", "order_history", "claims", "users"} {
		if last["shardmart."+c] != ActShardCollection {
			t.Errorf("%s: last step %s, want shardCollection", c, last["shardmart."+c])
		}
	}
}

// SHD-2: the alternative shard keys are planned side by side.
func TestPlanDatabaseAndVariants(t *testing.T) {
	spec, err := NewSpec(Options{Database: "shop", Now: planDay, Variants: map[string]string{"orders": "user_id_range", "products": "id_hashed"}})
	if err != nil {
		t.Fatal(err)
	}
	var shell []string
	for _, s := range Plan(spec) {
		shell = append(shell, s.Shell())
	}
	all := strings.Join(shell, "\n")
	for _, want := range []string{
		`db.adminCommand({ enableSharding: "shop" })`,
		`db.adminCommand({ shardCollection: "shop.orders", key: { user_id: 1 } })`,
		`db.adminCommand({ shardCollection: "shop.products", key: { _id: "hashed" } })`,
		`db.getSiblingDB("shop").runCommand({ createIndexes: "products", indexes: [ { key: { _id: "hashed" }, name: "_id_hashed" } ] })`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("plan lacks %s", want)
		}
	}
	if strings.Contains(all, "shardmart") {
		t.Error("plan still names the default database")
	}
}

func TestNewSpecRejects(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"unknown collection", Options{Variants: map[string]string{"wishlists": "x"}}},
		{"unknown variant", Options{Variants: map[string]string{"orders": "order_date"}}},
	}
	for _, tt := range tests {
		if _, err := NewSpec(tt.opts); !errors.Is(err, ErrUnknownVariant) {
			t.Errorf("%s: err = %v, want ErrUnknownVariant", tt.name, err)
		}
	}
	if _, err := NewSpec(Options{Database: "a.b"}); err == nil {
		t.Error("database with a dot: got nil error")
	}
}

// SHD-6: the shard-key rules.
func TestCheckRules(t *testing.T) {
	tests := []struct {
		name     string
		variants map[string]string
		coll     string
		rule     string
		sev      Severity
	}{
		{"default orders: one heavy user cannot split", nil, "orders", "skew", SevWarning},
		{"range user_id: ObjectIds ascend", map[string]string{"orders": "user_id_range"}, "orders", "monotonic", SevWarning},
		{"default products: hotspot per category", nil, "products", "multi-hotspot", SevInfo},
		{"hashed category: few values", map[string]string{"products": "category_hashed"}, "products", "cardinality", SevWarning},
		{"carts by user: guests share null", map[string]string{"carts": "user_id_hashed"}, "carts", "nullable", SevWarning},
		{"events firehose: monotonic mitigated", nil, "events", "monotonic", SevInfo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := NewSpec(Options{Now: planDay, Variants: tt.variants})
			if err != nil {
				t.Fatal(err)
			}
			fs := Check(spec)
			if !slices.ContainsFunc(fs, func(f Finding) bool {
				return f.Collection == tt.coll && f.Rule == tt.rule && f.Severity == tt.sev
			}) {
				t.Errorf("no %s %s finding for %s; got %v", tt.sev, tt.rule, tt.coll, fs)
			}
		})
	}
	if errs := Errors(Check(defaultSpec(t))); len(errs) != 0 {
		t.Errorf("default spec has rule errors: %v", errs)
	}
}

func TestCheckErrors(t *testing.T) {
	spec := defaultSpec(t)
	spec.Collections = append(spec.Collections, Collection{
		Name: "wishlists", Key: Key{asc("tags")},
		Traits: map[string]FieldTraits{"tags": {Array: true}},
		Zone:   "gold",
	})
	fs := Errors(Check(spec))
	for _, rule := range []string{"no-arrays", "zones"} {
		if !slices.ContainsFunc(fs, func(f Finding) bool { return f.Collection == "wishlists" && f.Rule == rule }) {
			t.Errorf("no %s error; got %v", rule, fs)
		}
	}
}
