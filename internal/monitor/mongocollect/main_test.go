package mongocollect_test

// The live collector tests: a real config server and two real shards (mongod 6.0.5, one member
// each, chunk size 1 MB, no mongos), started once for this test binary on first use on the
// monitor's own ports. The collectors are given the config server's URI, as a deployment
// without a router would; shardtest.Router shards collections and places each document on the
// shard owning its chunk, as mongos would route it.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/monitor"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
)

const chunkSizeMB = 1

var live = shardtest.Shared{Opts: launcher.ClusterOptions{Shards: 2, BasePort: launcher.MonitorTestPort, ChunkSizeMB: chunkSizeMB}}

func TestMain(m *testing.M) {
	code := m.Run()
	live.Stop()
	authLive.Stop()
	os.Exit(code)
}

func cluster(t *testing.T) (*launcher.Cluster, *shardtest.Router) { return live.Get(t) }

var dbSeq atomic.Int64

// liveNS names a collection in a database of its own for one test.
func liveNS(t *testing.T) string {
	return fmt.Sprintf("t%d_%s.items", dbSeq.Add(1), strings.ToLower(strings.TrimPrefix(t.Name(), "Test")))
}

// shardColl shards ns on key through the router, failing the test on error.
func shardColl(ctx context.Context, t *testing.T, r *shardtest.Router, ns string, key bson.D) {
	t.Helper()
	if err := r.ShardCollection(ctx, ns, key); err != nil {
		t.Fatal(err)
	}
}

// items makes n documents {_id, k: i, pad} of one BSON size each, and returns that size.
func items(n, padBytes int) ([]bson.D, int) {
	pad := strings.Repeat("x", padBytes)
	out := make([]bson.D, n)
	for i := range out {
		out[i] = bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "k", Value: int32(i)}, {Key: "pad", Value: pad}}
	}
	b, _ := bson.Marshal(out[0])
	return out, len(b)
}

func balancerOff(ctx context.Context, t *testing.T, r *shardtest.Router) {
	shardtest.BalancerOff(ctx, t, r)
}

// exporter opens the collectors on the config server's URI and registers those named (all
// when none) on a private registry, with a 10 s scrape timeout.
func exporter(t *testing.T, c *launcher.Cluster, names ...string) *prometheus.Registry {
	t.Helper()
	return exporterAt(t, c.ConfigURI(), names...)
}

// exporterAt is exporter on a URI of the caller's (another user's login).
func exporterAt(t *testing.T, uri string, names ...string) *prometheus.Registry {
	t.Helper()
	mc, err := mongocollect.Open(mongocollect.Options{URI: uri, ChunkMoveWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close(context.Background()) })
	var picked []monitor.Collector
	for _, col := range mc.Collectors() {
		if len(names) == 0 || contains(names, col.Name()) {
			picked = append(picked, col)
		}
	}
	if len(names) > 0 && len(picked) != len(names) {
		t.Fatalf("collectors %v: found %d", names, len(picked))
	}
	return monitor.NewRegistry(monitor.Options{Collectors: picked, ScrapeTimeout: 10 * time.Second, HotFloorBytes: 1 << 20})
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// only keeps, of g's series, those without a namespace label or with namespace ns (other
// tests' collections share the cluster), and drops the volatile collector durations.
func only(g prometheus.Gatherer, ns string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		var out []*dto.MetricFamily
		for _, mf := range mfs {
			if mf.GetName() == "shardmart_monitor_collector_duration_seconds" {
				continue
			}
			var keep []*dto.Metric
			for _, m := range mf.GetMetric() {
				if v, ok := label(m, "namespace"); !ok || v == ns {
					keep = append(keep, m)
				}
			}
			if len(keep) > 0 {
				mf.Metric = keep
				out = append(out, mf)
			}
		}
		return out, err
	})
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

// values gathers g once and returns name's samples keyed by their labels ("k=v,k=v" in label
// name order).
func values(t *testing.T, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

// oneChunk shards a new collection on the range key {k: 1}, which leaves its only chunk on the
// database's primary shard, places n documents of padBytes there, and returns the namespace
// and that shard.
func oneChunk(ctx context.Context, t *testing.T, r *shardtest.Router, n, padBytes int) (ns, owner string) {
	t.Helper()
	ns = liveNS(t)
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: 1}})
	docs, _ := items(n, padBytes)
	placed, err := r.Place(ctx, ns, docs)
	if err != nil || len(placed) != 1 {
		t.Fatalf("placed %v, %v: want all on one shard (one chunk)", placed, err)
	}
	for sh := range placed {
		owner = sh
	}
	return ns, owner
}

// other is the shard of the two that is not sh.
func other(sh string) string { return map[string]string{"sh0": "sh1", "sh1": "sh0"}[sh] }
