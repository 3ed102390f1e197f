package monitor

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/shardmart/shardmart/internal/advise/live"
)

// Report is what one gather says: what failed, what is down, which shard or node is hot, why,
// and what to do. --once prints it as text and the page as HTML; the decisions are made here
// only (with Judge).
type Report struct {
	FloorBytes float64
	Failed     []string // collectors whose last run failed
	Mongo      *MongoReport
	Cassandra  *CassandraReport
}

// MongoReport is the MongoDB part of a Report.
type MongoReport struct {
	Up, Down   []string
	Balancer   string // on, off, unknown
	InRound    bool
	Namespaces []NamespaceReport
	ChunkMoves []ChunkMove
	// Replication is every replica-set member the mongo_replication collector saw, by set and
	// member.
	Replication []ReplicationRow
	Todo        []string // one piece of advice per hot shard
}

// ReplicationRow is one replica-set member: its set's oplog window, how far it is behind its
// primary and its headroom (shardmart_mongo_oplog_window_seconds,
// shardmart_mongo_member_behind_primary_seconds, shardmart_mongo_member_oplog_headroom_seconds),
// in seconds; NaN when the series is missing.
type ReplicationRow struct {
	Set, Member              string
	Window, Behind, Headroom float64
	Note                     string // what the figures mean for the member, when it matters
}

// NamespaceReport is one collection's shards.
type NamespaceReport struct {
	Namespace string
	Rows      []ShardRow
}

// ShardRow is one shard of one collection, judged.
type ShardRow struct {
	Verdict
	Documents float64
	Notes     []string // HOT and chunk-skew reasons
	Advice    string   // what to do, when hot (also in the report's Todo, in row order)
}

// ChunkMove is one shardmart_mongo_chunk_moves series: chunk moves within the window.
type ChunkMove struct {
	Namespace, From, To, Result string
	Count                       float64
}

// CassandraReport is the Cassandra part of a Report: nodes judged by load like shards.
type CassandraReport struct {
	Up, Down []string
	Rows     []ShardRow // Shard is the node
	Todo     []string
}

// BuildReport judges one gather.
func BuildReport(mfs []*dto.MetricFamily, floorBytes float64) Report {
	return buildReport(index(mfs), floorBytes)
}

// buildReport judges an indexed gather (the page indexes once for its report and its history).
func buildReport(s series, floorBytes float64) Report {
	r := Report{FloorBytes: floorBytes}
	for _, c := range s["shardmart_monitor_collector_success"] {
		if c.value != 1 {
			r.Failed = append(r.Failed, c.labels["collector"])
		}
	}
	slices.Sort(r.Failed)
	if len(s["shardmart_mongo_shard_up"]) > 0 {
		r.Mongo = mongoReport(s, floorBytes)
	}
	if len(s["shardmart_cassandra_node_up"]) > 0 {
		r.Cassandra = cassandraReport(s, floorBytes)
	}
	return r
}

func mongoReport(s series, floorBytes float64) *MongoReport {
	m := &MongoReport{Balancer: "unknown"}
	adviseURI := ""
	if x := s[adviseInfoMetric]; len(x) == 1 {
		adviseURI = x[0].labels["uri"]
	}
	m.Up, m.Down = upDown(s["shardmart_mongo_shard_up"], "shard")
	if b := s["shardmart_mongo_balancer_enabled"]; len(b) == 1 {
		m.Balancer = map[bool]string{true: "on", false: "off"}[b[0].value == 1]
	}
	if b := s["shardmart_mongo_balancer_in_round"]; len(b) == 1 {
		m.InRound = b[0].value == 1
	}
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
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		shards := slices.Sorted(maps.Keys(byNS[ns]))
		shares := make([]Share, len(shards))
		for i, sh := range shards {
			shares[i] = Share{Shard: sh, DataBytes: byNS[ns][sh].data, Chunks: byNS[ns][sh].chunks}
		}
		nr := NamespaceReport{Namespace: ns}
		for _, v := range Judge(shares, floorBytes) {
			row := ShardRow{Verdict: v, Documents: byNS[ns][v.Shard].docs}
			if v.Hot {
				row.Notes = append(row.Notes, fmt.Sprintf("HOT: %s ≥ %.1f × %s (mean of the other shards) and ≥ the %s floor",
					bytesText(v.DataBytes), HotDataRatio, bytesText(v.OthersDataMean), bytesText(floorBytes)))
				row.Advice = advice(ns, v, m.Balancer, adviseURI)
				m.Todo = append(m.Todo, row.Advice)
			}
			if v.ChunkSkew {
				row.Notes = append(row.Notes, fmt.Sprintf("chunk-skew: %.0f chunks ≥ %.0f × %.1f (secondary: the balancer evens data size, not chunk counts, since 6.0.3)",
					v.Chunks, ChunkSkewRatio, v.OthersChunksMean))
			}
			nr.Rows = append(nr.Rows, row)
		}
		m.Namespaces = append(m.Namespaces, nr)
	}
	for _, x := range s["shardmart_mongo_chunk_moves"] {
		m.ChunkMoves = append(m.ChunkMoves, ChunkMove{Namespace: x.labels["namespace"], From: x.labels["shard"],
			To: x.labels["to_shard"], Result: x.labels["result"], Count: x.value})
	}
	slices.SortFunc(m.ChunkMoves, func(a, b ChunkMove) int {
		return strings.Compare(a.Namespace+a.From+a.To+a.Result, b.Namespace+b.From+b.To+b.Result)
	})
	m.Replication = replicationRows(s)
	return m
}

// The read routing's staleness budgets (readrouting.Table): a member behind by more than one
// sends every read with that budget to the primary (its lag as the routing measures it is at
// least as large).
const shortBudget, longBudget = 5.0, 10.0

func replicationRows(s series) []ReplicationRow {
	windows := map[string]float64{}
	for _, x := range s["shardmart_mongo_oplog_window_seconds"] {
		windows[x.labels["set"]] = x.value
	}
	headroom := map[[2]string]float64{}
	for _, x := range s["shardmart_mongo_member_oplog_headroom_seconds"] {
		headroom[[2]string{x.labels["set"], x.labels["member"]}] = x.value
	}
	var rows []ReplicationRow
	for _, x := range s["shardmart_mongo_member_behind_primary_seconds"] {
		r := ReplicationRow{Set: x.labels["set"], Member: x.labels["member"], Behind: x.value, Window: math.NaN(), Headroom: math.NaN()}
		if w, ok := windows[r.Set]; ok {
			r.Window = w
		}
		if h, ok := headroom[[2]string{r.Set, r.Member}]; ok {
			r.Headroom = h
		}
		switch {
		case r.Headroom <= 0:
			r.Note = "behind by more than the oplog window: it cannot catch up from the oplog and needs a full resync"
		case r.Behind > longBudget:
			r.Note = fmt.Sprintf("behind past both staleness budgets (%.0f s, %.0f s): every budgeted read goes to the primary", shortBudget, longBudget)
		case r.Behind > shortBudget:
			r.Note = fmt.Sprintf("behind past the %.0f s budget: reads with it go to the primary", shortBudget)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b ReplicationRow) int {
		if c := strings.Compare(a.Set, b.Set); c != 0 {
			return c
		}
		return strings.Compare(a.Member, b.Member)
	})
	return rows
}

// secondsText writes a duration in seconds for the page: tenths under a minute, whole seconds
// above, "?" when unknown.
func secondsText(v float64) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case math.Abs(v) < 60:
		return fmt.Sprintf("%.1f s", v)
	}
	return (time.Duration(v) * time.Second).String()
}

// cassandraReport judges nodes by load like shards (the same floor and ratio as the
// CassandraHotNode rule). Load is what a node gossips, up to a minute old.
func cassandraReport(s series, floorBytes float64) *CassandraReport {
	c := &CassandraReport{}
	c.Up, c.Down = upDown(s["shardmart_cassandra_node_up"], "node")
	var shares []Share
	for _, x := range s["shardmart_cassandra_load_bytes"] {
		shares = append(shares, Share{Shard: x.labels["node"], DataBytes: x.value})
	}
	slices.SortFunc(shares, func(a, b Share) int { return strings.Compare(a.Shard, b.Shard) })
	for _, v := range Judge(shares, floorBytes) {
		row := ShardRow{Verdict: v}
		if v.Hot {
			row.Notes = append(row.Notes, fmt.Sprintf("HOT: %s ≥ %.1f × %s (mean of the other nodes) and ≥ the %s floor",
				bytesText(v.DataBytes), HotDataRatio, bytesText(v.OthersDataMean), bytesText(floorBytes)))
			row.Advice = v.Shard + " is hot: compare its token ownership with the others' (uneven tokens: more vnodes or a new token allocation), " +
				"and look for huge partitions (shardmart_cassandra_max_partition_bytes) of a low-cardinality partition key: bucket it"
			c.Todo = append(c.Todo, row.Advice)
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}

// advice says what to do about one hot shard, starting from the balancer's state, and ends
// with the advise command for the collection (MONGOS_URI when the monitor has no URI to give).
func advice(ns string, v Verdict, balancer, adviseURI string) string {
	head := fmt.Sprintf("%s is hot on %s (%.0f%% of its data)", ns, v.Shard, 100*v.Fraction)
	if adviseURI == "" {
		adviseURI = "MONGOS_URI"
	}
	tail := "move a hot range by hand (`shardmart mongo move-range`), pin ranges with zones (`shardmart mongo zones`), " +
		"or reshard on a better key (reshardCollection); compare candidate keys on the live collection with `" + live.Command(adviseURI, ns) + "`"
	switch balancer {
	case "off":
		return head + ": the balancer is off: start it with `shardmart mongo balancer start` and watch the share fall; if it does not, " + tail
	case "on":
		return head + " although the balancer is on: it may be behind, blocked by jumbo chunks, or held by zones: " + tail
	}
	return head + ": check the balancer (`shardmart mongo balancer status`), then " + tail
}
