package mongocollect

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var chunkMovesDesc = prometheus.NewDesc("shardmart_mongo_chunk_moves",
	"chunk (range) moves within --chunk-move-window, by donor shard, recipient, collection and result (config.changelog)",
	[]string{"shard", "to_shard", "namespace", "result"}, nil)

// chunkMovesCollector counts the chunk moves config.changelog recorded within the window.
// Only pairs with a move get a series.
type chunkMovesCollector struct{ c *Cluster }

func (chunkMovesCollector) Name() string { return "mongo_chunk_moves" }

// changeEvent is one config.changelog entry of a chunk move.
type changeEvent struct {
	What    string `bson:"what"`
	NS      string `bson:"ns"`
	Details struct {
		From   string        `bson:"from"`
		To     string        `bson:"to"`
		Min    bson.RawValue `bson:"min"`
		Note   string        `bson:"note"`
		Errmsg string        `bson:"errmsg"`
	} `bson:"details"`
}

type moveKey struct{ from, to, ns, result string }

func (m chunkMovesCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	filter := bson.D{
		{Key: "time", Value: bson.D{{Key: "$gte", Value: time.Now().Add(-m.c.opts.ChunkMoveWindow)}}},
		{Key: "what", Value: bson.D{{Key: "$in", Value: bson.A{"moveChunk.commit", "moveChunk.error", "moveChunk.from"}}}},
	}
	var events []changeEvent
	if err := findAll(ctx, m.c.config.Database("config").Collection("changelog"), filter, &events); err != nil {
		return err
	}
	for k, n := range countChunkMoves(events) {
		ch <- prometheus.MustNewConstMetric(chunkMovesDesc, prometheus.GaugeValue, float64(n), k.from, k.to, k.ns, k.result)
	}
	return nil
}

// countChunkMoves counts committed and failed chunk moves. A failed move leaves a
// moveChunk.error and a moveChunk.from with an error (note "aborted" or errmsg), or only one
// of them when it failed early: per range, the larger of the two counts is the number of
// failed attempts, so none is counted twice.
func countChunkMoves(events []changeEvent) map[moveKey]int {
	type rangeKey struct {
		moveKey
		min string
	}
	errs, froms := map[rangeKey]int{}, map[rangeKey]int{}
	out := map[moveKey]int{}
	for _, e := range events {
		k := moveKey{from: e.Details.From, to: e.Details.To, ns: e.NS}
		switch {
		case e.What == "moveChunk.commit":
			k.result = "committed"
			out[k]++
		case e.What == "moveChunk.error":
			k.result = "failed"
			errs[rangeKey{k, e.Details.Min.String()}]++
		case e.What == "moveChunk.from" && (e.Details.Errmsg != "" || e.Details.Note == "aborted"):
			k.result = "failed"
			froms[rangeKey{k, e.Details.Min.String()}]++
		}
	}
	for k, n := range froms {
		errs[k] = max(errs[k], n)
	}
	for k, n := range errs {
		out[k.moveKey] += n
	}
	return out
}
