package mongocollect

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/readrouting"
)

var behindPrimaryDesc = prometheus.NewDesc("shardmart_mongo_member_behind_primary_seconds",
	"How far the member's applied writes trail its primary's (primary's lastAppliedWallTime − the member's, replSetGetStatus on the primary); 0 on an idle caught-up set",
	[]string{"set", "member"}, nil)

// replicationCollector reports, per shard that is up, its oplog window, how far each member is
// behind its primary, and each member's oplog headroom (readrouting: replSetGetStatus on the
// primary, the first and last oplog entries). The window and headroom series are the ones serve
// exports; the lag serve exports (status date − applied time) is not: the monitor writes no
// heartbeat, and on an idle set that figure reads up to the primary's 10 s no-op interval high.
// It costs a status and two single-document oplog reads per shard and scrape.
type replicationCollector struct{ c *Cluster }

func (replicationCollector) Name() string { return "mongo_replication" }

func (rc replicationCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	return onUpShards(ctx, rc.c.opts.Logger, v, func(ctx context.Context, s shard) error {
		st, err := readrouting.DriverSource{Client: s.client}.ReplSetStatus(ctx)
		if ce := (mongo.CommandError{}); errors.As(err, &ce) && ce.HasErrorCode(codeNoReplicationEnabled) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.Set == "" {
			st.Set = s.id
		}
		w, err := readrouting.ReadOplogWindow(ctx, s.client)
		if err != nil {
			return err
		}
		behind := readrouting.BehindPrimary(st)
		for member, d := range behind {
			ch <- prometheus.MustNewConstMetric(behindPrimaryDesc, prometheus.GaugeValue, d.Seconds(), st.Set, member)
		}
		readrouting.SendOplogWindow(ch, st.Set, w, behind)
		return nil
	})
}
