package mongocollect

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

var memberUpDesc = prometheus.NewDesc("shardmart_mongo_shard_member_up",
	"1 if the shard primary reaches the member (replSetGetStatus health), 0 if it does not", []string{"shard", "member"}, nil)

// membersCollector reports the health of each member of each shard that is up, as its primary
// sees it. shard_up alone does not show a primary that was cut off or crashed once a new one is
// elected: the shard is up again within seconds while the old primary stays unreachable.
type membersCollector struct{ c *Cluster }

func (membersCollector) Name() string { return "mongo_members" }

// codeNoReplicationEnabled: the shard is a lone mongod, not a replica set; it has no members.
const codeNoReplicationEnabled = 76

func (mc membersCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	return onUpShards(ctx, mc.c.opts.Logger, v, func(ctx context.Context, s shard) error {
		var st struct {
			Members []struct {
				Name   string  `bson:"name"`
				Health float64 `bson:"health"`
			} `bson:"members"`
		}
		err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st)
		if ce := (mongo.CommandError{}); errors.As(err, &ce) && ce.HasErrorCode(codeNoReplicationEnabled) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("replSetGetStatus: %w", err)
		}
		for _, m := range st.Members {
			ch <- prometheus.MustNewConstMetric(memberUpDesc, prometheus.GaugeValue, m.Health, s.id, m.Name)
		}
		return nil
	})
}
