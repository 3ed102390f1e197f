package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/sharding"
)

func TestMongoZoneRangeHashedDryRun(t *testing.T) {
	// orders is sharded on {user_id: "hashed"}: bounds are hash values, sent as NumberLong.
	got, err := runMongo(t, "zones", "add-range", "orders", "fast", "--min", `{"user_id": -100}`, "--max", `{"user_id": "4611686018427387902"}`, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	want := `db.adminCommand({ updateZoneKeyRange: "shardmart.orders", min: { user_id: NumberLong("-100") }, max: { user_id: NumberLong("4611686018427387902") }, zone: "fast" })` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestMongoZoneRangeHashedRefused(t *testing.T) {
	for _, args := range [][]string{
		{"zones", "add-range", "orders", "fast", "--min", `{"user_id": "alice"}`, "--dry-run"},
		{"zones", "remove-range", "orders", "--max", `{"user_id": 0.5}`, "--dry-run"},
	} {
		got, err := runMongo(t, args...)
		if !errors.Is(err, sharding.ErrHashedBound) || got != "" {
			t.Errorf("%v: out=%q err=%v, want ErrHashedBound and no command printed", args, got, err)
			continue
		}
		if !strings.Contains(err.Error(), "NumberLong") {
			t.Errorf("%v: error %q does not say bounds must be NumberLong", args, err)
		}
	}
}
