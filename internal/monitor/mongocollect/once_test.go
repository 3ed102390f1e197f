package mongocollect_test

import (
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/monitor"
)

// MON-1: --once on a real cluster: 2 MB inserted onto the one shard owning a ranged collection's only
// chunk, the balancer stopped, a 1 MiB floor: that shard is reported HOT with the reason, and
// the advice starts with the stopped balancer.
func TestOnceReportsHotShard(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	balancerOff(ctx, t, r)
	ns, hot := oneChunk(ctx, t, r, 2000, 1000)
	var out strings.Builder
	if err := monitor.Once(&out, exporter(t, c), 1<<20); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	var row string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == ns && f[1] == hot {
			row = line
		}
	}
	if !strings.Contains(row, "100.0%") ||
		!strings.Contains(row, "HOT: 2.") || !strings.Contains(row, "≥ 1.5 × 0 B (mean of the other shards) and ≥ the 1.0 MiB floor") {
		t.Errorf("row of %s: %q, want %s HOT with 100%% of the data and the reason", ns, row, hot)
	}
	for _, want := range []string{
		"balancer: off",
		ns + " is hot on " + hot + " (100% of its data): the balancer is off: start it with `shardmart mongo balancer start`",
		// No --advise-uri here: the command names the placeholder for the mongos.
		"`shardmart mongo move-range`", "`shardmart advise --from MONGOS_URI --collection " + ns + "`",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}
