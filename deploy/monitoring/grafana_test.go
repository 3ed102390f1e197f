package monitoring

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const dashboardFile = "grafana/shardmart-hot-shards.json"

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct{ H, W, X, Y int }
	Repeat  string `json:"repeat"`
	Targets []struct {
		RefID      string          `json:"refId"`
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
}

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardExprs maps "panel N (title) ref" to its PromQL with Grafana's variables replaced
// by values PromQL accepts.
func dashboardExprs(t *testing.T, d dashboard) map[string]string {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".+")
	exprs := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			e := vars.Replace(tg.Expr)
			if strings.Contains(e, "$") {
				t.Errorf("panel %d %q: unknown Grafana variable in %s", p.ID, p.Title, tg.Expr)
			}
			exprs[fmt.Sprintf("panel %d (%s) %s", p.ID, p.Title, tg.RefID)] = e
		}
	}
	return exprs
}

func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and schemaVersion >= 36", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	ids := map[int]bool{}
	titles := ""
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: gridPos %+v outside the 24-column grid", p.ID, p.Title, p.GridPos)
		}
		if p.Repeat != "" && !vars[p.Repeat] {
			t.Errorf("panel %d repeats over undefined variable %q", p.ID, p.Repeat)
		}
		if p.Type == "row" {
			continue
		}
		titles += p.Title + "\n"
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(string(tg.Datasource), "${datasource}") {
				t.Errorf("panel %d %q: datasource %s, want the ${datasource} variable (import picks it)", p.ID, p.Title, tg.Datasource)
			}
		}
	}
	// The seven per-shard metrics, data and write shares, firing alerts, Cassandra.
	for _, want := range []string{"1. ", "2. ", "3. ", "4. ", "5. ", "6. ", "7. ",
		"Data share per shard", "Write share per shard", "Firing alerts", "Load share per node"} {
		if !strings.Contains(titles, want) {
			t.Errorf("no panel titled %q…", want)
		}
	}
}

// Each expression becomes a recording rule in a scratch file: `promtool check rules` then
// parses it with Prometheus's own parser, without importing Prometheus into go.mod.
func TestDashboardPromQLValid(t *testing.T) {
	exprs := dashboardExprs(t, loadDashboard(t))
	keys := slices.Sorted(maps.Keys(exprs))
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rec
	for i, k := range keys {
		rules = append(rules, rec{fmt.Sprintf("dashboard:expr_%d", i+1), exprs[k]})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		t.Logf("dashboard:expr_%d = %s", i+1, k) // promtool names the failing rule by number
	}
	run(t, "promtool", "prometheus", "check", "rules", f)
}

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)

// The dashboard reads only contract metrics (and Prometheus's ALERTS); every contract metric
// is shown on it or alerted on, so a metric the exporter publishes is never silently unused.
// annotationQuery finds the metric an alert annotation's template queries.
var annotationQuery = regexp.MustCompile(`query "([a-zA-Z_:][a-zA-Z0-9_:]*)"`)

func TestDashboardUsesContract(t *testing.T) {
	contract := contractMetrics(t)
	d := loadDashboard(t)
	used := map[string]bool{}
	for k, e := range dashboardExprs(t, d) {
		for _, n := range metricNames(e) {
			used[n] = true
			if !contract[n] && n != "ALERTS" {
				t.Errorf("%s reads %s, which is not in %s", k, n, contractDoc)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil || !contract[m[1]] {
			t.Errorf("variable %s: %q does not take label values of a contract metric", v.Name, v.Definition)
		}
	}
	for _, r := range loadRules(t) {
		for _, n := range metricNames(r.Expr) {
			used[n] = true
		}
		// An annotation's template may query a metric (an info metric whose label it prints).
		for _, a := range r.Annotations {
			for _, m := range annotationQuery.FindAllStringSubmatch(a, -1) {
				used[m[1]] = true
			}
		}
	}
	for n := range contract {
		if !used[n] {
			t.Errorf("contract metric %s is on no dashboard panel and in no rule", n)
		}
	}
}
