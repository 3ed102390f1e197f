// Package monitoring checks the Prometheus rules, Alertmanager config and Grafana dashboard in
// this directory with the real tools (promtool, amtool) and against the metric contract in
// docs/monitor.md. The tools are required, not optional: a missing one fails the test.
package monitoring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const contractDoc = "../../docs/monitor.md"

// ruleFiles are every rule file Prometheus loads (prometheus/prometheus.yml lists each): the
// monitor's alerts, replication's and the repairer's.
var ruleFiles = []string{
	"rules/shardmart.rules.yml",
	"rules/shardmart-replication.rules.yml",
	"rules/shardmart-repair.rules.yml",
}

// tool returns the path of a Debian-packaged binary, failing (not skipping) when it is missing:
// a skipped rule test would look like a pass in CI.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v): install it with `apt-get install %s` (.ci/run does)", name, err, pkg)
	}
	return p
}

// run runs a tool and fails with its whole output. The bound only stops a hung tool: promtool
// takes 1-2 s, but it was killed at 30 s on the shared 2-core machine at load average ~80
// while this package's Cassandra nodes booted.
func run(t *testing.T, name, pkg string, args ...string) string {
	t.Helper()
	out, err := runErr(t, name, pkg, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr is run returning the tool's failure, with its whole output, instead of failing.
func runErr(t *testing.T, name, pkg string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, tool(t, name, pkg), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func TestPromtoolCheckRules(t *testing.T) {
	run(t, "promtool", "prometheus", append([]string{"check", "rules"}, ruleFiles...)...)
}

// MON-1: every alert and recording rule passes its promtool unit tests (firing and quiet cases).
func TestPromtoolTestRules(t *testing.T) {
	tests, err := filepath.Glob("rules/*.test.yml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule test files under rules/ (%v)", err)
	}
	run(t, "promtool", "prometheus", append([]string{"test", "rules"}, tests...)...)
}

// The example config must load, rule files included (promtool resolves them relative to the config).
func TestPromtoolCheckConfig(t *testing.T) {
	out := run(t, "promtool", "prometheus", "check", "config", "prometheus/prometheus.yml")
	if want := fmt.Sprintf("%d rule files found", len(ruleFiles)); !strings.Contains(out, want) {
		t.Fatalf("prometheus.yml does not load the %d rule files %v:\n%s", len(ruleFiles), ruleFiles, out)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadRules reads the rules of every rule file.
func loadRules(t *testing.T) []rule {
	t.Helper()
	var rs []rule
	for _, name := range ruleFiles {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var f ruleFile
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, g := range f.Groups {
			rs = append(rs, g.Rules...)
		}
	}
	return rs
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// promtool passes a rule nobody tests; this keeps "every rule has a firing and a quiet case".
func TestEveryRuleUnitTested(t *testing.T) {
	fires, quiet, exprs := map[string]bool{}, map[string]bool{}, ""
	files, _ := filepath.Glob("rules/*.test.yml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		if err := yaml.Unmarshal(b, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
			for _, e := range tc.PromqlExprTest {
				exprs += e.Expr + "\n"
			}
		}
	}
	for _, r := range loadRules(t) {
		switch {
		case r.Alert != "" && !fires[r.Alert]:
			t.Errorf("alert %s has no test where it fires", r.Alert)
		case r.Alert != "" && !quiet[r.Alert]:
			t.Errorf("alert %s has no test where it stays quiet", r.Alert)
		case r.Record != "" && !strings.Contains(exprs, r.Record):
			t.Errorf("recording rule %s is not checked by any promql_expr_test", r.Record)
		}
	}
}

// Alertmanager routes on team, mails are grouped by severity; every alert must carry both and
// say what to do.
func TestAlertsLabelledAndAnnotated(t *testing.T) {
	severities := []string{"page", "ticket", "info"}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if !slices.Contains(severities, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want one of %v", r.Alert, r.Labels["severity"], severities)
		}
		if r.Labels["team"] == "" {
			t.Errorf("%s: no team label (Alertmanager routes on it)", r.Alert)
		}
		for _, a := range []string{"summary", "description", "action"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
	}
}

// contractMetrics reads the "metric" column of every table in docs/monitor.md.
func contractMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(contractDoc)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	col := -1
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if col < 0 {
			col = slices.Index(cells, "metric") // header row; -1 for tables without the column
			if col < 0 {
				col = -2
			}
			continue
		}
		if col >= 0 && col < len(cells) {
			if n := strings.Trim(cells[col], "`"); strings.HasPrefix(n, "shardmart_") {
				names[n] = true
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d metrics parsed from %s's tables: did the table layout change?", len(names), contractDoc)
	}
	return names
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlBrackets = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:.])([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
		"and", "or", "unless", "offset", "inf", "nan", "Inf", "NaN", "atan2"}
)

// metricNames lists the metric names an expression selects: what is left once strings, label
// matchers, ranges and grouping clauses are gone, minus function calls and keywords. promtool
// has already proved the expression parses, so this need not be a full parser.
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlBrackets.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	var names []string
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(e, -1) {
		name := e[m[2]:m[3]]
		if strings.HasPrefix(strings.TrimSpace(e[m[3]:]), "(") || slices.Contains(promqlKeywords, name) {
			continue // a function or aggregation call, or a keyword
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (namespace) (rate(a_total{x="b_c",y=~"d|e"}[5m] offset 1h)) / on (shard) group_left () b:rec * 1e3 > bool 2 and absent(c) unless d`)
	want := []string{"a_total", "b:rec", "c", "d"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricNames = %v, want %v", got, want)
	}
}

// The rules may read only contract metrics and their own records; every contract metric is
// read by a rule or the dashboard (TestDashboardUsesContract covers the rest).
func TestRulesUseContractMetrics(t *testing.T) {
	contract := contractMetrics(t)
	rules := loadRules(t)
	records := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = true
		}
	}
	for _, r := range rules {
		for _, n := range metricNames(r.Expr) {
			if !contract[n] && !records[n] {
				t.Errorf("%s%s reads %s, which is neither in %s nor recorded here", r.Alert, r.Record, n, contractDoc)
			}
		}
	}
}
