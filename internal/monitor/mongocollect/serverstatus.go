package mongocollect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var (
	opsDesc = prometheus.NewDesc("shardmart_mongo_operations_total",
		"operations the shard primary received (serverStatus opcounters)", []string{"shard", "type"}, nil)
	connectionsDesc = prometheus.NewDesc("shardmart_mongo_connections",
		"client connections to the shard primary (serverStatus connections)", []string{"shard", "state"}, nil)
	cpuDesc = prometheus.NewDesc("shardmart_mongo_cpu_seconds_total",
		"CPU time of the shard primary's mongod (serverStatus extra_info user/system_time_us)", []string{"shard", "mode"}, nil)
	coresDesc = prometheus.NewDesc("shardmart_mongo_cpu_cores",
		"cores of the shard primary's host (hostInfo system.numCores)", []string{"shard"}, nil)
	latencyDesc = prometheus.NewDesc("shardmart_mongo_op_latency_seconds_total",
		"total latency of the shard primary's operations (serverStatus opLatencies.*.latency)", []string{"shard", "op"}, nil)
	latencyOpsDesc = prometheus.NewDesc("shardmart_mongo_op_latency_ops_total",
		"operations counted in op_latency_seconds_total (serverStatus opLatencies.*.ops)", []string{"shard", "op"}, nil)
	networkDesc = prometheus.NewDesc("shardmart_mongo_network_bytes_total",
		"bytes the shard primary received and sent (serverStatus network)", []string{"shard", "direction"}, nil)
)

// serverStatusCollector reads serverStatus and hostInfo on each shard primary that is up:
// load (opcounters), connections, CPU, latency and bytes (metrics 3-7 of docs/monitor.md).
type serverStatusCollector struct{ c *Cluster }

func (serverStatusCollector) Name() string { return "mongo_serverstatus" }

// serverStatusCmd leaves out the large sections the monitor does not read.
var serverStatusCmd = bson.D{{Key: "serverStatus", Value: 1}, {Key: "repl", Value: 0}, {Key: "metrics", Value: 0},
	{Key: "locks", Value: 0}, {Key: "wiredTiger", Value: 0}, {Key: "tcmalloc", Value: 0}}

func (sc serverStatusCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	return onUpShards(ctx, sc.c.opts.Logger, v, func(ctx context.Context, s shard) error {
		st, err := s.client.Database("admin").RunCommand(ctx, serverStatusCmd).Raw()
		if err != nil {
			return fmt.Errorf("serverStatus: %w", err)
		}
		host, err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hostInfo", Value: 1}}).Raw()
		if err != nil {
			return fmt.Errorf("hostInfo: %w", err)
		}
		r := reader{}
		emit := func(d *prometheus.Desc, t prometheus.ValueType, doc bson.Raw, scale float64, path string, labels ...string) {
			if x, ok := r.num(doc, path); ok {
				ch <- prometheus.MustNewConstMetric(d, t, x*scale, append([]string{s.id}, labels...)...)
			}
		}
		for _, t := range []string{"insert", "query", "update", "delete", "getmore", "command"} {
			emit(opsDesc, prometheus.CounterValue, st, 1, "opcounters."+t, t)
		}
		for _, state := range []string{"current", "active"} {
			emit(connectionsDesc, prometheus.GaugeValue, st, 1, "connections."+state, state)
		}
		emit(cpuDesc, prometheus.CounterValue, st, 1e-6, "extra_info.user_time_us", "user")
		emit(cpuDesc, prometheus.CounterValue, st, 1e-6, "extra_info.system_time_us", "system")
		emit(coresDesc, prometheus.GaugeValue, host, 1, "system.numCores")
		for _, op := range []string{"reads", "writes", "commands"} {
			emit(latencyDesc, prometheus.CounterValue, st, 1e-6, "opLatencies."+op+".latency", op)
			emit(latencyOpsDesc, prometheus.CounterValue, st, 1, "opLatencies."+op+".ops", op)
		}
		emit(networkDesc, prometheus.CounterValue, st, 1, "network.bytesIn", "in")
		emit(networkDesc, prometheus.CounterValue, st, 1, "network.bytesOut", "out")
		return r.err()
	})
}

// reader reads numbers out of a server reply and remembers which were missing, so one absent
// field (another server version, a platform without extra_info times) drops its series and
// fails the collector visibly instead of exporting a zero.
type reader struct{ missing []string }

func (r *reader) num(doc bson.Raw, path string) (float64, bool) {
	v, err := doc.LookupErr(strings.Split(path, ".")...)
	if err == nil {
		if x, ok := v.AsFloat64OK(); ok {
			return x, true
		}
	}
	r.missing = append(r.missing, path)
	return 0, false
}

func (r *reader) err() error {
	if len(r.missing) == 0 {
		return nil
	}
	return errors.New("no number at " + strings.Join(r.missing, ", "))
}
