package cassandracollect

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/monitor"
)

// Tests run in this order on the shared cluster; the last one stops a node and restarts it.

func newCollectors(t *testing.T, withNodetool bool) *Collectors {
	t.Helper()
	c := cluster(t)
	o := Options{Hosts: c.Hosts(), Timeout: 10 * time.Second}
	if withNodetool {
		o.Nodetool = func(ctx context.Context, host string, args ...string) (string, error) {
			return c.Nodetool(ctx, slices.Index(c.Hosts(), host), args...)
		}
	}
	col, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(col.Close)
	return col
}

// scrape gathers col through the exporter on a private registry, as Prometheus would; a gather error fails the test.
func scrape(t *testing.T, col *Collectors) []*dto.MetricFamily {
	t.Helper()
	var cols []monitor.Collector
	for _, u := range col.Updaters() {
		cols = append(cols, u)
	}
	reg := monitor.NewRegistry(monitor.Options{Collectors: cols, ScrapeTimeout: time.Minute})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return mfs
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// value is the series of name whose labels include want.
func value(mfs []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			for k, v := range want {
				if l[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, mfs []*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := value(mfs, name, want)
	if !ok {
		t.Fatalf("no series %s%v in the scrape", name, want)
	}
	return v
}

func assertAllCollectorsSucceeded(t *testing.T, mfs []*dto.MetricFamily) {
	t.Helper()
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "shardmart_monitor_collector_success" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n++
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("collector %s failed (success 0); see the log", labelsOf(m)["collector"])
			}
		}
	}
	if n < 6 {
		t.Errorf("%d collector_success series, want one per collector (at least 6)", n)
	}
}

// contractRow is one metric of docs/monitor.md: its type and its labels with, where the doc
// lists them, the allowed values.
type contractRow struct {
	typ    string
	labels map[string][]string
}

var (
	backticked = regexp.MustCompile("`([a-z_]+)`(?: \\(([^)]*)\\))?")
)

// readContract parses the metric tables of docs/monitor.md for the names with prefix.
func readContract(t *testing.T, prefixes ...string) map[string]contractRow {
	t.Helper()
	b, err := os.ReadFile("../../../docs/monitor.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]contractRow{}
	// The shop server's client metrics and the repairer's share the prefix but are not the
	// monitor's.
	shop := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			shop = strings.HasPrefix(line, "## The shop's") || strings.HasPrefix(line, "## Repair")
		}
		if shop {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		cells = cells[1 : len(cells)-1]
		for i, cell := range cells {
			name := strings.Trim(strings.TrimSpace(cell), "`")
			if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) || i+2 >= len(cells) {
				continue
			}
			row := contractRow{typ: strings.TrimSpace(cells[i+1]), labels: map[string][]string{}}
			for _, m := range backticked.FindAllStringSubmatch(cells[i+2], -1) {
				var vals []string
				if m[2] != "" {
					for _, v := range strings.Split(m[2], ",") {
						vals = append(vals, strings.TrimSpace(v))
					}
				}
				row.labels[m[1]] = vals
			}
			rows[name] = row
			break
		}
	}
	return rows
}

func TestScrapeEmitsExactlyTheCassandraSeriesOfTheMetricContract(t *testing.T) {
	mfs := scrape(t, newCollectors(t, true))
	// The exporter's registry adds its floor gauge to the Cassandra and self metrics.
	contract := readContract(t, "shardmart_cassandra_", "shardmart_monitor_")
	// The advise command's URI is a MongoDB one: a monitor of Cassandra alone has none to export.
	delete(contract, "shardmart_monitor_advise_from_info")
	if len(contract) != 11 {
		t.Fatalf("parsed %d Cassandra and exporter metrics from docs/monitor.md, want 11: %v", len(contract), contract)
	}
	var got []string
	for _, mf := range mfs {
		name := mf.GetName()
		got = append(got, name)
		row, ok := contract[name]
		if !ok {
			t.Errorf("%s is not in docs/monitor.md", name)
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); typ != row.typ {
			t.Errorf("%s is a %s, the contract says %s", name, typ, row.typ)
		}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			var names, want []string
			for k := range l {
				names = append(names, k)
			}
			for k := range row.labels {
				want = append(want, k)
			}
			sort.Strings(names)
			sort.Strings(want)
			if !slices.Equal(names, want) {
				t.Errorf("%s has labels %v, the contract says %v", name, names, want)
				break
			}
			for k, allowed := range row.labels {
				if len(allowed) > 0 && !slices.Contains(allowed, l[k]) {
					t.Errorf("%s{%s=%q}: the contract allows %v", name, k, l[k], allowed)
				}
			}
		}
	}
	for name := range contract {
		if !slices.Contains(got, name) {
			t.Errorf("contract metric %s missing from the scrape", name)
		}
	}
}

func TestEveryNodeIsUpAndEveryCollectorSucceeds(t *testing.T) {
	c := cluster(t)
	mfs := scrape(t, newCollectors(t, false))
	for _, h := range c.Hosts() {
		if v := mustValue(t, mfs, "shardmart_cassandra_node_up", map[string]string{"node": h}); v != 1 {
			t.Errorf("node_up{node=%s} = %v, want 1", h, v)
		}
	}
	assertAllCollectorsSucceeded(t, mfs)
}

func TestBigPartitionShowsAsMaxPartitionBytesOnItsOwnerOnly(t *testing.T) {
	c := cluster(t)
	mfs := scrape(t, newCollectors(t, false))
	for i, h := range c.Hosts() {
		v, ok := value(mfs, "shardmart_cassandra_max_partition_bytes", map[string]string{"node": h, "keyspace": skewKeyspace, "table": skewTable})
		if i == ownerIdx {
			// Rounded up to a whole MiB by Cassandra, over a 6 MiB payload plus row overhead.
			if !ok || v < hotBytes || v > hotBytes+2<<20 {
				t.Errorf("owner %s: max_partition_bytes = %v (present %v), want within [%d, %d]", h, v, ok, hotBytes, hotBytes+2<<20)
			}
			continue
		}
		if v > 1<<20 {
			t.Errorf("non-owner %s: max_partition_bytes = %v, want at most 1 MiB (it holds small partitions only)", h, v)
		}
	}
}

// tablehistogram reads the Read Latency column (µs) of `nodetool tablehistograms` at row.
func tablehistogram(t *testing.T, out, row string) float64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == row {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("tablehistograms %s: %v", row, err)
			}
			return v
		}
	}
	t.Fatalf("no %s row in nodetool tablehistograms:\n%s", row, out)
	return 0
}

func TestTableLatencyIsInSecondsAsNodetoolTablehistogramsShows(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	owner := c.Hosts()[ownerIdx]
	mfs := scrape(t, newCollectors(t, false))
	out, err := c.Nodetool(ctx, ownerIdx, "tablehistograms", skewKeyspace, skewTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"read", "write"} {
		for _, q := range []string{"0.5", "0.99"} {
			mustValue(t, mfs, "shardmart_cassandra_table_latency_seconds", map[string]string{"node": owner, "keyspace": skewKeyspace, "table": skewTable, "op": op, "quantile": q})
		}
		mustValue(t, mfs, "shardmart_cassandra_table_latency_max_seconds", map[string]string{"node": owner, "keyspace": skewKeyspace, "table": skewTable, "op": op})
	}
	for _, q := range []struct {
		metric string
		labels map[string]string
		row    string
	}{
		{"shardmart_cassandra_table_latency_seconds", map[string]string{"quantile": "0.99"}, "99%"},
		{"shardmart_cassandra_table_latency_max_seconds", nil, "Max"},
	} {
		micros := tablehistogram(t, out, q.row)
		if micros < 2000 {
			t.Fatalf("nodetool read %s is %v µs: reading the 6 MiB partition should take over 2 ms, else this test cannot tell ms from s", q.row, micros)
		}
		labels := map[string]string{"node": owner, "keyspace": skewKeyspace, "table": skewTable, "op": "read"}
		maps.Copy(labels, q.labels)
		got := mustValue(t, mfs, q.metric, labels)
		want := micros / 1e6
		// Cassandra rounds to 1 ms; the two reads of the histogram are not atomic.
		if math.Abs(got-want) > 0.0015+0.25*want {
			t.Errorf("read latency %s %v = %v s, nodetool tablehistograms says %v µs = %v s", q.metric, q.labels, got, micros, want)
		}
	}
}

// ownsEffective parses `nodetool status <keyspace>`: address → Owns (effective) as a ratio.
func ownsEffective(t *testing.T, out string) map[string]float64 {
	t.Helper()
	owns := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[0]) != 2 || !strings.ContainsAny(f[0][:1], "UD") {
			continue
		}
		for _, x := range f[2:] {
			if strings.HasSuffix(x, "%") {
				v, err := strconv.ParseFloat(strings.TrimSuffix(x, "%"), 64)
				if err != nil {
					t.Fatalf("nodetool status: %q: %v", x, err)
				}
				owns[f[1]] = v / 100
			}
		}
	}
	return owns
}

func TestTokenOwnershipMatchesNodetoolStatusAndSumsToReplicationFactor(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	mfs := scrape(t, newCollectors(t, false))
	for _, ks := range []struct {
		name string
		rf   float64
	}{{skewKeyspace, 1}, {rf2Keyspace, 2}} {
		out, err := c.Nodetool(ctx, 0, "status", ks.name)
		if err != nil {
			t.Fatal(err)
		}
		owns := ownsEffective(t, out)
		sum := 0.0
		for _, h := range c.Hosts() {
			got := mustValue(t, mfs, "shardmart_cassandra_token_ownership_ratio", map[string]string{"node": h, "keyspace": ks.name})
			sum += got
			want, ok := owns[h]
			if !ok {
				t.Fatalf("nodetool status %s lists no %s:\n%s", ks.name, h, out)
			}
			if math.Abs(got-want) > 0.0005 { // nodetool prints one decimal of a percent
				t.Errorf("%s on %s: ownership %v, nodetool status says %v", ks.name, h, got, want)
			}
		}
		if math.Abs(sum-ks.rf) > 1e-9 {
			t.Errorf("%s (RF %v): ownership sums to %v over the nodes", ks.name, ks.rf, sum)
		}
	}
}

func TestDroppedMessagesCounterPerVerbFromNodetoolTpstats(t *testing.T) {
	c := cluster(t)
	mfs := scrape(t, newCollectors(t, true))
	for _, h := range c.Hosts() {
		for _, verb := range []string{"MUTATION_REQ", "READ_REQ", "HINT_REQ"} {
			if v := mustValue(t, mfs, "shardmart_cassandra_dropped_messages_total", map[string]string{"node": h, "verb": verb}); v < 0 {
				t.Errorf("dropped %s on %s = %v", verb, h, v)
			}
		}
	}
	assertAllCollectorsSucceeded(t, mfs)
}

func TestLoadBytesIsTheGossipedLoadNodetoolInfoReports(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	col := newCollectors(t, false)
	owner, other := c.Hosts()[ownerIdx], c.Hosts()[1-ownerIdx]
	// Each node republishes its load every 60 s: wait for the first publication after the flush.
	var mfs []*dto.MetricFamily
	eventually.NoError(t, 100*time.Second, func() error {
		mfs = scrape(t, col)
		o, _ := value(mfs, "shardmart_cassandra_load_bytes", map[string]string{"node": owner})
		p, _ := value(mfs, "shardmart_cassandra_load_bytes", map[string]string{"node": other})
		if o >= hotBytes && p > 0 {
			return nil
		}
		return fmt.Errorf("load_bytes: owner %s %v (want ≥ %d), other %s %v (want > 0)", owner, o, hotBytes, other, p)
	})
	for i, h := range c.Hosts() {
		got := mustValue(t, mfs, "shardmart_cassandra_load_bytes", map[string]string{"node": h})
		out, err := c.Nodetool(ctx, i, "info")
		if err != nil {
			t.Fatal(err)
		}
		want := infoLoad(t, out)
		if math.Abs(got-want) > 0.1*want+256<<10 {
			t.Errorf("%s: load_bytes %v, nodetool info Load %v", h, got, want)
		}
	}
	// --once's summary judges the same scrape: the node with the big partition is hot.
	var summary strings.Builder
	if err := monitor.WriteSummary(&summary, mfs, 1<<20); err != nil {
		t.Fatal(err)
	}
	hotLine := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(owner) + `\s.*HOT: `)
	if !hotLine.MatchString(summary.String()) || !strings.Contains(summary.String(), owner+" is hot") ||
		strings.Contains(summary.String(), other+" is hot") {
		t.Errorf("--once summary does not name %s (only) as the hot node:\n%s", owner, summary.String())
	}
}

// infoLoad parses "Load : 8.16 MiB" of `nodetool info` into bytes.
func infoLoad(t *testing.T, out string) float64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "Load" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 {
			break
		}
		n, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("nodetool info Load %q: %v", v, err)
		}
		unit := map[string]float64{"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[f[1]]
		if unit == 0 {
			t.Fatalf("nodetool info Load %q: unknown unit", v)
		}
		return n * unit
	}
	t.Fatalf("no Load line in nodetool info:\n%s", out)
	return 0
}

// The live node writes the stopped replica's hints into an open hint file. 5.0.8's
// system_views.pending_hints (like nodetool listpendinghints) lists only closed files queued
// for dispatch, and a file stays open while its target is down until it reaches
// max_hints_file_size (128 MiB), so pending_hints stays 0 here: the test pins that behaviour,
// which docs/monitor.md states, and fails if a Cassandra upgrade changes it.
func TestStoppedNodeIsNodeUpZeroWhileTheScrapeSucceeds(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	hosts := c.Hosts()
	live, stopped := hosts[0], hosts[1]
	hintsDir := filepath.Join(c.Nodes()[0].DataDir(), "hints")
	// Bring node 2 back, wait until both nodes see each other UN and give it latency again, so
	// a repeated run (-count) starts on the same two-node cluster the earlier tests expect.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := c.StartNode(ctx, 1); err != nil {
			t.Errorf("restart node 2: %v", err)
			return
		}
		if err := c.WaitConverged(ctx); err != nil {
			t.Errorf("after restarting node 2: %v", err)
			return
		}
		cfg := gocql.NewCluster(hosts...)
		cfg.Timeout = 20 * time.Second
		cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
		s, err := cfg.CreateSession()
		if err != nil {
			t.Errorf("after restarting node 2: %v", err)
			return
		}
		defer s.Close()
		if err := exerciseSkew(ctx, s); err != nil {
			t.Errorf("after restarting node 2: %v", err)
		}
		// Node 1 closes its hint file once node 2 is back and deletes it once delivered; a
		// file left would show as pending_hints in the next run.
		eventually.NoError(t, 2*time.Minute, func() error {
			if files, _ := filepath.Glob(filepath.Join(hintsDir, "*.hints")); len(files) > 0 {
				return fmt.Errorf("hints for node 2 not yet delivered: %v", files)
			}
			return nil
		})
	})
	if err := c.StopNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cfg := gocql.NewCluster(live)
	cfg.DisableInitialHostLookup = true
	cfg.Consistency = gocql.One
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 100 {
		if err := s.Query("INSERT INTO "+rf2Keyspace+".h (k, v) VALUES (?, ?)", i, "x").WithContext(ctx).Exec(); err != nil {
			t.Fatalf("write at ONE with a replica down: %v", err)
		}
	}
	// The hints reach the live node's open hint file within hints_flush_period (1 s): wait for
	// them there, so the zero pending_hints below is about hints that exist. A file holding
	// only its descriptor is a few hundred bytes; 100 hints are several KiB.
	eventually.NoError(t, 30*time.Second, func() error {
		files, err := filepath.Glob(filepath.Join(hintsDir, "*.hints"))
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				size += fi.Size()
			}
		}
		if size < 2<<10 {
			return fmt.Errorf("%d bytes of hints in %s (files %v), want the 100 hints' (≥ 2 KiB)", size, hintsDir, files)
		}
		t.Logf("hint files: %d bytes", size)
		return nil
	})
	mfs := scrape(t, newCollectors(t, false))
	if v := mustValue(t, mfs, "shardmart_cassandra_node_up", map[string]string{"node": stopped}); v != 0 {
		t.Errorf("node_up{node=%s} = %v after StopNode, want 0", stopped, v)
	}
	if v := mustValue(t, mfs, "shardmart_cassandra_node_up", map[string]string{"node": live}); v != 1 {
		t.Errorf("node_up{node=%s} = %v, want 1", live, v)
	}
	assertAllCollectorsSucceeded(t, mfs)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if labelsOf(m)["node"] == stopped && mf.GetName() != "shardmart_cassandra_node_up" {
				t.Errorf("stopped node has a %s series: a node that does not answer has node_up only", mf.GetName())
			}
		}
	}
	mustValue(t, mfs, "shardmart_cassandra_token_ownership_ratio", map[string]string{"node": live, "keyspace": rf2Keyspace})
	if h := mustValue(t, mfs, "shardmart_cassandra_pending_hints", map[string]string{"node": live}); h != 0 {
		t.Errorf("pending_hints{node=%s} = %v: 5.0.8 was expected to list no open hint file (see the comment); update docs/monitor.md", live, h)
	}
}
