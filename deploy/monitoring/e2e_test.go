package monitoring

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.mongodb.org/mongo-driver/v2/bson"

	cassandra "github.com/shardmart/shardmart/internal/cassandra/launcher"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/monitor"
	"github.com/shardmart/shardmart/internal/monitor/cassandracollect"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
	"github.com/shardmart/shardmart/internal/monitor/stacktest"
	"github.com/shardmart/shardmart/internal/sharding"
)

// The shipped rules and Alertmanager configuration, end to end: the real exporter scraped by
// the real Prometheus (Debian package), alerts routed by the real Alertmanager to an SMTP sink
// the test runs. Only waiting times are shortened: every rule's `for:` and Alertmanager's
// group_wait/group_interval; the expressions, thresholds, labels and routes are the files'.

// fastRules copies the rule file with every `for:` shortened to d.
func fastRules(t *testing.T, d string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("rules", "shardmart.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	b = regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(b, []byte("$1 "+d))
	path := filepath.Join(t.TempDir(), "shardmart.rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// renderedAlertmanager runs the documented render step (render.sh) for the sink and the team
// address, then shortens the grouping waits.
func renderedAlertmanager(t *testing.T, sink *stacktest.SMTPSink, team string) []byte {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join("alertmanager", "render.sh"))
	cmd.Env = append(os.Environ(), "SHARDMART_ALERT_EMAIL="+team, "SHARDMART_SMTP_SMARTHOST="+sink.Addr,
		"SHARDMART_SMTP_REQUIRE_TLS=false")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.sh: %v", err)
	}
	out = regexp.MustCompile(`(?m)^(\s+group_(wait|interval):) \S+$`).ReplaceAll(out, []byte("$1 1s"))
	return out
}

// adviseURI is the monitor's --advise-uri in these tests: the alert's action names it.
const adviseURI = "mongodb://mongos.test:27017"

// serveExporter serves the exporter's registry on a loopback port for Prometheus to scrape.
func serveExporter(t *testing.T, cols []monitor.Collector, floor float64) string {
	t.Helper()
	reg := monitor.NewRegistry(monitor.Options{Collectors: cols, ScrapeTimeout: 10 * time.Second, HotFloorBytes: floor, AdviseURI: adviseURI})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: monitor.Handler(reg, nil), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

func subjectHas(parts ...string) func(stacktest.Mail) bool {
	return func(m stacktest.Mail) bool {
		subject := ""
		for _, line := range strings.Split(m.Data, "\n") {
			if strings.HasPrefix(line, "Subject:") {
				subject = line
			}
		}
		for _, p := range parts {
			if !strings.Contains(subject, p) {
				return false
			}
		}
		return true
	}
}

var alertingCluster = shardtest.Shared{Opts: launcher.ClusterOptions{Shards: 2, ChunkSizeMB: 1, BasePort: launcher.AlertingTestPort}}

func TestMain(m *testing.M) {
	code := m.Run()
	alertingCluster.Stop()
	os.Exit(code)
}

// MON-1: 20 MB inserted onto one shard of a real sharded cluster (balancer stopped)
// fires HotShardDataSize for that shard and collection, and the team gets the e-mail naming
// both and the action (with the exact advise command for the collection); the real balancer evens the data and the resolution is mailed.
func TestHotShardAlertMailedAndResolvedByTheBalancer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, r := alertingCluster.Get(t)

	const db, team = "shop", "dba@shardmart.test"
	// A fresh collection per run (-count): an earlier run's orders are balanced and fire nothing.
	ns := fmt.Sprintf("%s.orders_%d", db, time.Now().UnixNano())
	if err := r.ShardCollection(ctx, ns, bson.D{{Key: "k", Value: int32(1)}}); err != nil {
		t.Fatal(err)
	}
	shardtest.BalancerOff(ctx, t, r)
	pad := strings.Repeat("x", 1000)
	hot := ""
	for lo := 0; lo < 20_000; lo += 2000 {
		batch := make([]bson.D, 2000)
		for i := range batch {
			batch[i] = bson.D{{Key: "k", Value: int64(lo + i)}, {Key: "pad", Value: pad}}
		}
		got, err := r.Place(ctx, ns, batch)
		if err != nil {
			t.Fatal(err)
		}
		for sh := range got {
			hot = sh
		}
	}

	mc, err := mongocollect.Open(mongocollect.Options{URI: c.ConfigURI()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close(context.Background()) })
	target := serveExporter(t, mc.Collectors(), 8<<20)

	sink := stacktest.StartSMTPSink(t)
	am := stacktest.StartAlertmanager(ctx, t, renderedAlertmanager(t, sink, team))
	stacktest.StartPrometheus(ctx, t, stacktest.PrometheusOptions{Targets: []string{target},
		RuleFiles: []string{fastRules(t, "2s")}, AlertmanagerAddr: am.Addr, Interval: time.Second})

	start := time.Now()
	fired, err := sink.Wait(ctx, subjectHas("[FIRING", "HotShardDataSize", ns, hot))
	if err != nil {
		t.Fatalf("%v; mails: %d", err, len(sink.All()))
	}
	t.Logf("HotShardDataSize mailed %s after the stack started", time.Since(start).Round(100*time.Millisecond))
	if len(fired.To) != 1 || fired.To[0] != team {
		t.Errorf("mail to %v, want %s", fired.To, team)
	}
	for _, want := range []string{"Hot shard " + hot, "shardmart mongo balancer start",
		"`shardmart advise --from '" + adviseURI + "' --collection " + ns + "`"} {
		if !strings.Contains(strings.ReplaceAll(fired.Data, "=\r\n", ""), want) {
			t.Errorf("the alert mail does not say %q:\n%s", want, fired.Data)
		}
	}

	if err := sharding.StartBalancer(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.WaitSettled(ctx, ns); err != nil {
		t.Fatal(err)
	}
	settled := time.Now()
	if _, err := sink.Wait(ctx, subjectHas("[RESOLVED", "HotShardDataSize", ns, hot)); err != nil {
		t.Fatalf("%v; mails: %d", err, len(sink.All()))
	}
	t.Logf("resolution mailed %s after the balancer settled (%s after the alert)",
		time.Since(settled).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
}

// MON-1 for Cassandra: one node holding 16 MiB more than the other (one partition of an RF 1
// keyspace) fires CassandraHotNode for that node, mailed to the team. Cassandra gossips a
// node's load once a minute, so this case takes that long.
func TestCassandraHotNodeAlertMailed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := cassandra.ForTest(t, cassandra.Options{Nodes: 2, BaseAddr: cassandra.AlertingTestAddr, HeapMB: 512})

	cfg := gocql.NewCluster(c.Hosts()...)
	cfg.Timeout = 20 * time.Second
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE hot WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE hot.big (pk text, ck int, v blob, PRIMARY KEY (pk, ck))",
	} {
		if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	blob := make([]byte, 128<<10)
	for i := range 128 { // 16 MiB, incompressible, in one partition: on one node
		_, _ = rand.Read(blob)
		if err := s.Query("INSERT INTO hot.big (pk, ck, v) VALUES ('p', ?, ?)", i, blob).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.Nodes() {
		if _, err := c.Nodetool(ctx, i, "flush", "hot"); err != nil { // load counts SSTables only
			t.Fatal(err)
		}
	}
	out, err := c.Nodetool(ctx, 0, "getendpoints", "hot", "big", "p")
	if err != nil {
		t.Fatal(err)
	}
	owner := strings.TrimSpace(out)

	cc, err := cassandracollect.New(ctx, cassandracollect.Options{Hosts: c.Hosts(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Close)
	var cols []monitor.Collector
	for _, u := range cc.Updaters() {
		cols = append(cols, u)
	}
	target := serveExporter(t, cols, 8<<20)
	const team = "cassandra-team@shardmart.test"
	sink := stacktest.StartSMTPSink(t)
	am := stacktest.StartAlertmanager(ctx, t, renderedAlertmanager(t, sink, team))
	stacktest.StartPrometheus(ctx, t, stacktest.PrometheusOptions{Targets: []string{target},
		RuleFiles: []string{fastRules(t, "2s")}, AlertmanagerAddr: am.Addr, Interval: time.Second})

	start := time.Now()
	m, err := sink.Wait(ctx, subjectHas("[FIRING", "CassandraHotNode", owner))
	if err != nil {
		t.Fatalf("%v; mails: %d", err, len(sink.All()))
	}
	t.Logf("CassandraHotNode for %s mailed %s after the stack started", owner, time.Since(start).Round(time.Second))
	if len(m.To) != 1 || m.To[0] != team {
		t.Errorf("mail to %v, want %s", m.To, team)
	}
	for _, mail := range sink.All() {
		if subjectHas("CassandraHotNode")(mail) && !subjectHas(owner)(mail) {
			t.Errorf("a hot-node mail names another node:\n%s", mail.Data)
		}
	}
}
