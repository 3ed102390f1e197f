// Package stacktest starts the real alerting stack for end-to-end tests: Prometheus and
// Alertmanager from the Debian packages `prometheus` and `prometheus-alertmanager`, on
// loopback, each dying with the test process, plus an SMTP sink (emersion/go-smtp) that keeps
// every message it is given. Nothing here is a stand-in: the alerts are evaluated by
// Prometheus and the e-mails written by Alertmanager.
package stacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// Binaries as the Debian packages install them.
const (
	PrometheusBin   = "prometheus"
	AlertmanagerBin = "prometheus-alertmanager"
)

// need fails the test (never skips) when a binary of the stack is missing.
func need(t testing.TB, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s (apt-get install %s; .ci/run does it)", bin, pkg, pkg)
	}
	return p
}

// freeAddr reserves a loopback port by listening on it and closing it again: the servers below
// take an address, not a listener.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// start runs a server process for the test and kills it in t.Cleanup, printing its log when
// the test failed.
func start(t testing.TB, name, bin string, args ...string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	child, err := serverproc.Start(cmd, filepath.Join(dir, name+".pid"), true)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		child.Kill()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, tail(b, 4000))
		}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, t testing.TB, url string) {
	t.Helper()
	err := eventually.Until(ctx, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s not ready: %v", url, err)
	}
}

// Prometheus is a running Prometheus server.
type Prometheus struct{ URL string }

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	Targets          []string // scrape targets, host:port serving /metrics
	RuleFiles        []string
	AlertmanagerAddr string // host:port, "" for none
	Interval         time.Duration
}

// StartPrometheus writes a configuration for o and starts Prometheus on a free loopback port.
func StartPrometheus(ctx context.Context, t testing.TB, o PrometheusOptions) *Prometheus {
	t.Helper()
	bin := need(t, PrometheusBin, "prometheus")
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", o.Interval, o.Interval)
	if len(o.RuleFiles) > 0 {
		cfg.WriteString("rule_files:\n")
		for _, f := range o.RuleFiles {
			fmt.Fprintf(&cfg, "  - %q\n", f)
		}
	}
	if o.AlertmanagerAddr != "" {
		fmt.Fprintf(&cfg, "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", o.AlertmanagerAddr)
	}
	cfg.WriteString("scrape_configs:\n  - job_name: shardmart\n    static_configs:\n      - targets: [")
	for i, tg := range o.Targets {
		if i > 0 {
			cfg.WriteString(", ")
		}
		fmt.Fprintf(&cfg, "%q", tg)
	}
	cfg.WriteString("]\n")
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start(t, "prometheus", bin, "--config.file="+path, "--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--log.level=warn")
	p := &Prometheus{URL: "http://" + addr}
	waitReady(ctx, t, p.URL+"/-/ready")
	return p
}

// Alert is one alert of Prometheus's /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending, firing
	Value       string            `json:"value"`
}

// Alerts lists the pending and firing alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]Alert, error) {
	var body struct {
		Data struct {
			Alerts []Alert `json:"alerts"`
		} `json:"data"`
	}
	return body.Data.Alerts, getJSON(ctx, p.URL+"/api/v1/alerts", &body)
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.Unmarshal(b, v)
}

// Alertmanager is a running Alertmanager.
type Alertmanager struct{ Addr string }

// StartAlertmanager starts Alertmanager with the given configuration on a free loopback port,
// clustering off.
func StartAlertmanager(ctx context.Context, t testing.TB, config []byte) *Alertmanager {
	t.Helper()
	bin := need(t, AlertmanagerBin, "prometheus-alertmanager")
	dir := t.TempDir()
	path := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(path, config, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	start(t, "alertmanager", bin, "--config.file="+path, "--web.listen-address="+addr,
		"--storage.path="+filepath.Join(dir, "data"), "--cluster.listen-address=", "--log.level=warn")
	am := &Alertmanager{Addr: addr}
	waitReady(ctx, t, "http://"+addr+"/-/ready")
	return am
}

// Mail is one message the sink received.
type Mail struct {
	From string
	To   []string
	Data string // headers and body as sent
}

// SMTPSink is an SMTP server on loopback that keeps every message.
type SMTPSink struct {
	Addr string
	mu   sync.Mutex
	mail []Mail
	got  chan struct{} // closed and replaced on each message
}

// StartSMTPSink listens on a free loopback port until the test ends.
func StartSMTPSink(t testing.TB) *SMTPSink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &SMTPSink{Addr: l.Addr().String(), got: make(chan struct{})}
	s := smtp.NewServer(sink)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return sink
}

// NewSession implements smtp.Backend.
func (s *SMTPSink) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{sink: s}, nil }

type session struct {
	sink *SMTPSink
	m    Mail
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.m.From = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.To = append(s.m.To, to)
	return nil
}
func (s *session) Reset()        { s.m = Mail{} }
func (s *session) Logout() error { return nil }
func (s *session) Data(r io.Reader) error {
	var b bytes.Buffer
	if _, err := io.Copy(&b, r); err != nil {
		return err
	}
	s.m.Data = b.String()
	s.sink.mu.Lock()
	s.sink.mail = append(s.sink.mail, s.m)
	close(s.sink.got)
	s.sink.got = make(chan struct{})
	s.sink.mu.Unlock()
	return nil
}

// Wait returns the first message (in arrival order) that match accepts, waiting for new ones
// until ctx ends.
func (s *SMTPSink) Wait(ctx context.Context, match func(Mail) bool) (Mail, error) {
	seen := 0
	for {
		s.mu.Lock()
		for ; seen < len(s.mail); seen++ {
			if match(s.mail[seen]) {
				m := s.mail[seen]
				s.mu.Unlock()
				return m, nil
			}
		}
		got := s.got
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Mail{}, errors.Join(errors.New("stacktest: no matching e-mail"), ctx.Err())
		case <-got:
		}
	}
}

// All returns every message received so far.
func (s *SMTPSink) All() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mail...)
}
