package mongocollect

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var migrationsDesc = prometheus.NewDesc("shardmart_mongo_migrations",
	"range migrations within --migration-window, by donor shard, recipient, collection and result (config.changelog)",
	[]string{"shard", "to_shard", "namespace", "result"}, nil)

// migrationsCollector counts the migrations config.changelog recorded within the window.
// Only pairs with a migration get a series.
type migrationsCollector struct{ c *Cluster }

func (migrationsCollector) Name() string { return "mongo_migrations" }

// changeEvent is one config.changelog entry of a migration.
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

type migrationKey struct{ from, to, ns, result string }

func (m migrationsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	filter := bson.D{
		{Key: "time", Value: bson.D{{Key: "$gte", Value: time.Now().Add(-m.c.opts.MigrationWindow)}}},
		{Key: "what", Value: bson.D{{Key: "$in", Value: bson.A{"moveChunk.commit", "moveChunk.error", "moveChunk.from"}}}},
	}
	var events []changeEvent
	if err := findAll(ctx, m.c.config.Database("config").Collection("changelog"), filter, &events); err != nil {
		return err
	}
	for k, n := range countMigrations(events) {
		ch <- prometheus.MustNewConstMetric(migrationsDesc, prometheus.GaugeValue, float64(n), k.from, k.to, k.ns, k.result)
	}
	return nil
}

// countMigrations counts committed and failed migrations. A failed migration leaves a
// moveChunk.error and a moveChunk.from with an error (note "aborted" or errmsg), or only one
// of them when it failed early: per range, the larger of the two counts is the number of
// failed attempts, so none is counted twice.
func countMigrations(events []changeEvent) map[migrationKey]int {
	type rangeKey struct {
		migrationKey
		min string
	}
	errs, froms := map[rangeKey]int{}, map[rangeKey]int{}
	out := map[migrationKey]int{}
	for _, e := range events {
		k := migrationKey{from: e.Details.From, to: e.Details.To, ns: e.NS}
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
		out[k.migrationKey] += n
	}
	return out
}
