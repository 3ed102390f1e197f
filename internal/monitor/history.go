package monitor

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shardmart/shardmart/internal/sharechart"
)

// snapshot is what the page keeps of one gather: per namespace and shard, data bytes (orphans
// excluded) and the write counter.
type snapshot struct {
	at     time.Time
	data   map[string]map[string]float64 // namespace → shard → bytes
	writes map[string]map[string]float64 // namespace → shard → writes since the shard started
	// perCollection: writes come from shardmart_mongo_collection_operations_total{op="writes"}.
	// Otherwise from the shard's opcounters (insert+update+delete of all collections) under
	// the namespace "", the same for every chart.
	perCollection bool
}

// writeTypes are the opcounters types that are writes, for the fallback.
var writeTypes = map[string]bool{"insert": true, "update": true, "delete": true}

func takeSnapshot(s series, at time.Time) snapshot {
	sn := snapshot{at: at, data: map[string]map[string]float64{}, writes: map[string]map[string]float64{}}
	add := func(m map[string]map[string]float64, ns, shard string, v float64) {
		if m[ns] == nil {
			m[ns] = map[string]float64{}
		}
		m[ns][shard] += v
	}
	for _, x := range s["shardmart_mongo_collection_data_bytes"] {
		add(sn.data, x.labels["namespace"], x.labels["shard"], x.value)
	}
	for _, x := range s["shardmart_mongo_collection_operations_total"] {
		if x.labels["op"] == "writes" {
			sn.perCollection = true
			add(sn.writes, x.labels["namespace"], x.labels["shard"], x.value)
		}
	}
	if !sn.perCollection {
		for _, x := range s["shardmart_mongo_operations_total"] {
			if writeTypes[x.labels["type"]] {
				add(sn.writes, "", x.labels["shard"], x.value)
			}
		}
	}
	return sn
}

// history is the page's bounded memory of snapshots, oldest first.
type history struct {
	keep     int
	interval time.Duration
	snaps    []snapshot
}

func (h *history) add(sn snapshot) {
	h.snaps = append(h.snaps, sn)
	if over := len(h.snaps) - h.keep; over > 0 {
		h.snaps = slices.Delete(h.snaps, 0, over)
	}
}

// panel is ns's chart: the history right-aligned on a fixed axis of keep ticks (now at the
// right edge), so the chart does not stretch while the history fills. Ticks are placed by
// index: samples are taken every interval, a slow gather only shifts one a little.
func (h *history) panel(ns string) sharechart.Panel {
	shardSet := map[string]bool{}
	for _, sn := range h.snaps {
		for sh := range sn.data[ns] {
			shardSet[sh] = true
		}
	}
	shards := slices.Sorted(maps.Keys(shardSet))
	p := sharechart.Panel{Title: ns, Names: shards, Data: make([][]int64, h.keep), Writes: make([][]int64, h.keep)}
	off := h.keep - len(h.snaps)
	for i, sn := range h.snaps {
		p.Data[off+i] = row(sn.data[ns], shards)
		if i > 0 {
			p.Writes[off+i] = writeRow(h.snaps[i-1], sn, ns, shards)
		}
	}
	span := time.Duration(h.keep) * h.interval
	for q := 4; q >= 0; q-- {
		p.XLabels = append(p.XLabels, ago(span*time.Duration(q)/4))
	}
	p.Note = fmt.Sprintf("solid: data · dashed: writes per %s (collStats latencyStats)", h.interval)
	if n := len(h.snaps); n > 0 && !h.snaps[n-1].perCollection {
		p.Note = fmt.Sprintf("dashed: ALL writes of the shard per %s (opcounters), not this collection's", h.interval)
	}
	return p
}

// row is one tick's figures in shard order, nil when ns was not there.
func row(m map[string]float64, shards []string) []int64 {
	if m == nil {
		return nil
	}
	out := make([]int64, len(shards))
	for i, sh := range shards {
		out[i] = int64(m[sh])
	}
	return out
}

// writeRow is the writes per shard between two snapshots, nil when a counter is missing or went
// back (the shard restarted): that tick's share is unknown, not 0.
func writeRow(prev, cur snapshot, ns string, shards []string) []int64 {
	if !cur.perCollection {
		ns = ""
	}
	a, b := prev.writes[ns], cur.writes[ns]
	if a == nil || b == nil || prev.perCollection != cur.perCollection {
		return nil
	}
	out := make([]int64, len(shards))
	for i, sh := range shards {
		before, ok1 := a[sh]
		after, ok2 := b[sh]
		switch {
		case !ok1 && !ok2: // the shard holds none of ns: no writes
		case !ok1 || !ok2 || after < before:
			return nil
		default:
			out[i] = int64(after - before)
		}
	}
	return out
}

// ago labels a point of the time axis: "now", "−15m", "−1h".
func ago(d time.Duration) string {
	switch {
	case d == 0:
		return "now"
	case d%time.Hour == 0:
		return fmt.Sprintf("−%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("−%dm", d/time.Minute)
	}
	return "−" + d.Round(time.Second).String()
}
