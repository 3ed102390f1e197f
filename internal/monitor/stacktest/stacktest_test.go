package stacktest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The plumbing on its own: a gauge served over HTTP, a rule on it evaluated by the real
// Prometheus, the alert routed by the real Alertmanager to the sink as an e-mail, and the
// resolution mailed when the gauge drops.
func TestStackMailsAFiringAndAResolvedAlert(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "stacktest_hot", Help: "1 when hot"})
	reg.MustRegister(g)
	g.Set(1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	sink := StartSMTPSink(t)
	am := StartAlertmanager(ctx, t, []byte(fmt.Sprintf(`
global:
  smtp_smarthost: %q
  smtp_from: alerts@shardmart.test
  smtp_require_tls: false
route:
  receiver: team
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: team
    email_configs:
      - to: team@shardmart.test
        send_resolved: true
`, sink.Addr)))
	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: stacktest
    rules:
      - alert: StackHot
        expr: stacktest_hot > 0
        annotations: {summary: "it is hot"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	StartPrometheus(ctx, t, PrometheusOptions{Targets: []string{l.Addr().String()}, RuleFiles: []string{rules},
		AlertmanagerAddr: am.Addr, Interval: time.Second})

	m, err := sink.Wait(ctx, func(m Mail) bool { return strings.Contains(m.Data, "StackHot") })
	if err != nil {
		t.Fatal(err)
	}
	if len(m.To) != 1 || m.To[0] != "team@shardmart.test" {
		t.Errorf("mail to %v", m.To)
	}
	g.Set(0)
	if _, err := sink.Wait(ctx, func(m Mail) bool { return strings.Contains(m.Data, "RESOLVED") }); err != nil {
		t.Fatalf("%v; got %d mails", err, len(sink.All()))
	}
}
