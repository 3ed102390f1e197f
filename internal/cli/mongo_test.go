package cli

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func runMongo(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := execRoot(t, append([]string{"mongo"}, args...)...)
	return out, err
}

func TestMongoPlanMatchesGolden(t *testing.T) {
	got, err := runMongo(t, "plan", "--firehose-day", "2026-11-21")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../sharding/testdata/plan.golden")
	if err != nil {
		t.Fatal(err)
	}
	// The CLI prefixes the rule findings as comments, then prints the plan.
	if !strings.HasSuffix(got, string(want)) {
		t.Errorf("mongo plan output does not end with the golden plan:\n%s", got)
	}
	if !strings.Contains(got, "// warning: orders [skew]") {
		t.Errorf("rule findings missing:\n%s", got)
	}
}

func TestMongoNeedsURI(t *testing.T) {
	t.Setenv("SHARDMART_MONGO_URI", "")
	for _, args := range [][]string{{"apply"}, {"balancer", "status"}, {"balancer", "stop"}, {"firehose", "roll"}, {"zones", "list"}} {
		if _, err := runMongo(t, args...); !errors.Is(err, errNoMongoURI) {
			t.Errorf("%v: err = %v, want errNoMongoURI", args, err)
		}
	}
}

func TestMongoFlagErrors(t *testing.T) {
	tests := [][]string{
		{"plan", "--variant", "orders=order_date"},
		{"plan", "--variant", "orders"},
		{"plan", "--tier", "fast"},
		{"zones", "add-range", "products", "fast", "--min", `{"_id": 1}`, "--dry-run"},
		{"zones", "add-range", "wishlists", "fast", "--dry-run"},
	}
	for _, args := range tests {
		if _, err := runMongo(t, args...); err == nil {
			t.Errorf("%v: got nil error", args)
		}
	}
}

func TestMongoZoneRangeDryRun(t *testing.T) {
	got, err := runMongo(t, "--db", "shop", "zones", "add-range", "products", "fast", "--min", `{"category":"books"}`, "--max", `{"category":"books"}`, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	want := `db.adminCommand({ updateZoneKeyRange: "shop.products", min: { category: "books", _id: MinKey }, max: { category: "books", _id: MaxKey }, zone: "fast" })` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
