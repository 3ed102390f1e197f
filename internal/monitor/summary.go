package monitor

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ErrCollectorsFailed is returned by WriteSummary after the table when a collector failed, so
// a script running --once sees a non-zero exit.
var ErrCollectorsFailed = errors.New("monitor: some collectors failed (named above; the log says why)")

// series indexes one gather by metric name; each sample keeps its labels.
type series map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func index(mfs []*dto.MetricFamily) series {
	out := series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				s.value = m.GetUntyped().GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// WriteSummary prints the --once report from one gather of the registry: collectors that
// failed, shards that are down, then per collection each shard's data, share and chunks, the
// hot shards (Judge) and what to do about each.
func WriteSummary(w io.Writer, mfs []*dto.MetricFamily, floorBytes float64) error {
	s := index(mfs)
	var failed []string
	for _, c := range s["shardmart_monitor_collector_success"] {
		if c.value != 1 {
			failed = append(failed, c.labels["collector"])
		}
	}
	slices.Sort(failed)
	if len(failed) > 0 {
		fmt.Fprintf(w, "collectors failed: %s\n", strings.Join(failed, ", "))
	}
	if ups := s["shardmart_mongo_shard_up"]; len(ups) > 0 {
		writeMongo(w, s, floorBytes)
	}
	if ups := s["shardmart_cassandra_node_up"]; len(ups) > 0 {
		writeCassandra(w, s, floorBytes)
	}
	if len(failed) > 0 {
		return ErrCollectorsFailed
	}
	return nil
}

func writeMongo(w io.Writer, s series, floorBytes float64) {
	up, down := upDown(s["shardmart_mongo_shard_up"], "shard")
	balancer := "unknown"
	if b := s["shardmart_mongo_balancer_enabled"]; len(b) == 1 {
		balancer = map[bool]string{true: "on", false: "off"}[b[0].value == 1]
	}
	fmt.Fprintf(w, "MongoDB: shards up: %s; down: %s; balancer: %s; hot floor %s\n",
		orNone(up), orNone(down), balancer, bytesText(floorBytes))

	// namespace → shard → figures; a shard is listed when it has data or chunks of the namespace.
	type fig struct{ data, docs, chunks float64 }
	byNS := map[string]map[string]*fig{}
	get := func(x sample) *fig {
		ns, sh := x.labels["namespace"], x.labels["shard"]
		if byNS[ns] == nil {
			byNS[ns] = map[string]*fig{}
		}
		if byNS[ns][sh] == nil {
			byNS[ns][sh] = &fig{}
		}
		return byNS[ns][sh]
	}
	for _, x := range s["shardmart_mongo_collection_data_bytes"] {
		get(x).data = x.value
	}
	for _, x := range s["shardmart_mongo_collection_documents"] {
		get(x).docs = x.value
	}
	for _, x := range s["shardmart_mongo_collection_chunks"] {
		get(x).chunks = x.value
	}

	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tSHARD\tDATA\tSHARE\tDOCUMENTS\tCHUNKS\t")
	var todo []string
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		shards := slices.Sorted(maps.Keys(byNS[ns]))
		shares := make([]Share, len(shards))
		for i, sh := range shards {
			shares[i] = Share{Shard: sh, DataBytes: byNS[ns][sh].data, Chunks: byNS[ns][sh].chunks}
		}
		for _, v := range Judge(shares, floorBytes) {
			var notes []string
			if v.Hot {
				notes = append(notes, fmt.Sprintf("HOT: %s ≥ %.1f × %s (mean of the other shards) and ≥ the %s floor",
					bytesText(v.DataBytes), HotDataRatio, bytesText(v.OthersDataMean), bytesText(floorBytes)))
				todo = append(todo, advice(ns, v, balancer))
			}
			if v.ChunkSkew {
				notes = append(notes, fmt.Sprintf("chunk-skew: %.0f chunks ≥ %.0f × %.1f (secondary: the balancer evens data size, not chunk counts, since 6.0.3)",
					v.Chunks, ChunkSkewRatio, v.OthersChunksMean))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%.0f\t%.0f\t%s\n", ns, v.Shard, bytesText(v.DataBytes), 100*v.Fraction,
				byNS[ns][v.Shard].docs, v.Chunks, strings.Join(notes, "; "))
		}
	}
	_ = tw.Flush()
	if len(todo) == 0 {
		fmt.Fprintln(w, "no hot shard")
		return
	}
	fmt.Fprintln(w, "what to do:")
	for _, t := range todo {
		fmt.Fprintf(w, "- %s\n", t)
	}
}

// advice says what to do about one hot shard, starting from the balancer's state.
func advice(ns string, v Verdict, balancer string) string {
	head := fmt.Sprintf("%s is hot on %s (%.0f%% of its data)", ns, v.Shard, 100*v.Fraction)
	tail := "move a hot range by hand (`shardmart mongo move-range`), pin ranges with zones (`shardmart mongo zones`), " +
		"or reshard on a better key (reshardCollection); compare candidate keys with `shardmart advise`"
	switch balancer {
	case "off":
		return head + ": the balancer is off: start it with `shardmart mongo balancer start` and watch the share fall; if it does not, " + tail
	case "on":
		return head + " although the balancer is on: it may be behind, blocked by jumbo chunks, or held by zones: " + tail
	}
	return head + ": check the balancer (`shardmart mongo balancer status`), then " + tail
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// bytesText is a size in binary units, exact enough to compare with the floor by eye.
func bytesText(b float64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%.0f B", b)
	}
	div, exp := float64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", b/div, "KMGTP"[exp])
}

// Once is --once: one scrape of g, summarised on w.
func Once(w io.Writer, g prometheus.Gatherer, floorBytes float64) error {
	mfs, err := g.Gather()
	if err != nil {
		return fmt.Errorf("monitor: scrape: %w", err)
	}
	return WriteSummary(w, mfs, floorBytes)
}

// writeCassandra prints each node's load and share and the hot nodes, judged like shards (the
// same floor and ratio as the CassandraHotNode rule). Load is what the node gossips, up to a
// minute old.
func writeCassandra(w io.Writer, s series, floorBytes float64) {
	up, down := upDown(s["shardmart_cassandra_node_up"], "node")
	fmt.Fprintf(w, "Cassandra: nodes up: %s; down: %s; hot floor %s\n", orNone(up), orNone(down), bytesText(floorBytes))
	var shares []Share
	for _, x := range s["shardmart_cassandra_load_bytes"] {
		shares = append(shares, Share{Shard: x.labels["node"], DataBytes: x.value})
	}
	slices.SortFunc(shares, func(a, b Share) int { return strings.Compare(a.Shard, b.Shard) })
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLOAD\tSHARE\t")
	var hot []string
	for _, v := range Judge(shares, floorBytes) {
		note := ""
		if v.Hot {
			note = fmt.Sprintf("HOT: %s ≥ %.1f × %s (mean of the other nodes) and ≥ the %s floor",
				bytesText(v.DataBytes), HotDataRatio, bytesText(v.OthersDataMean), bytesText(floorBytes))
			hot = append(hot, v.Shard)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\n", v.Shard, bytesText(v.DataBytes), 100*v.Fraction, note)
	}
	_ = tw.Flush()
	if len(hot) == 0 {
		fmt.Fprintln(w, "no hot node")
		return
	}
	fmt.Fprintln(w, "what to do:")
	for _, n := range hot {
		fmt.Fprintf(w, "- %s is hot: compare its token ownership with the others' (uneven tokens: more vnodes or a new token allocation), "+
			"and look for huge partitions (shardmart_cassandra_max_partition_bytes) of a low-cardinality partition key: bucket it\n", n)
	}
}

// upDown splits up-gauge samples into the sorted values of label that are up and down.
func upDown(samples []sample, label string) (up, down []string) {
	for _, x := range samples {
		if x.value == 1 {
			up = append(up, x.labels[label])
		} else {
			down = append(down, x.labels[label])
		}
	}
	slices.Sort(up)
	slices.Sort(down)
	return up, down
}
