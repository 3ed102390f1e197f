package mongocollect

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/readrouting"
)

// replicationCollector reports, per shard that is up, its oplog window and each member's lag and
// headroom, measured as the shop's read routing measures them (readrouting: replSetGetStatus on
// the primary, the first and last oplog entries), under the same series names: the page shows
// them, and a Prometheus scraping both the shop and the monitor reads one vocabulary. It costs a
// status and two single-document oplog reads per shard and scrape.
type replicationCollector struct{ c *Cluster }

func (replicationCollector) Name() string { return "mongo_replication" }

func (rc replicationCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	v, err := rc.c.view(ctx)
	if err != nil {
		return err
	}
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
		readrouting.SendReplication(ch, readrouting.LagFromStatus(st), map[string]readrouting.OplogWindow{st.Set: w})
		return nil
	})
}
