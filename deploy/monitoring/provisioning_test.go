package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	datasourcesFile = "grafana/provisioning/datasources/prometheus.yaml"
	dashboardsFile  = "grafana/provisioning/dashboards/shardmart.yaml"
	// grafanaInstall is where deploy/monitoring/grafana is installed for Grafana (the dashboards
	// provider file says so): the provider's path must be it.
	grafanaInstall = "/etc/grafana/shardmart"
	servicesConfig = "prometheus/prometheus-services.yml"
	manifestsDir   = "../kubernetes"
)

// The Grafana provisioning files are decoded strictly into these, which hold the fields of
// Grafana's provisioning format (apiVersion 1) the files use: Grafana itself ignores a field
// it does not know, so a misspelt one would be lost without a word.
type datasourcesConfig struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string `yaml:"name"`
		UID       string `yaml:"uid"`
		Type      string `yaml:"type"`
		Access    string `yaml:"access"`
		URL       string `yaml:"url"`
		IsDefault bool   `yaml:"isDefault"`
		Editable  bool   `yaml:"editable"`
		JSONData  struct {
			TimeInterval string `yaml:"timeInterval"`
			HTTPMethod   string `yaml:"httpMethod"`
		} `yaml:"jsonData"`
	} `yaml:"datasources"`
}

type dashboardsConfig struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// decodeYAMLStrict decodes a file, refusing a field v does not have.
func decodeYAMLStrict(dir, file string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// dashboardDatasources are the data sources the dashboard's panels, queries and variables
// name, as JSON, with the datasource variable's plugin type.
func dashboardDatasources(b []byte) (refs []string, variableType string, variableCurrent map[string]any, err error) {
	var d struct {
		Panels []struct {
			Datasource json.RawMessage `json:"datasource"`
			Targets    []struct {
				Datasource json.RawMessage `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Current    map[string]any  `json:"current"`
				Datasource json.RawMessage `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, "", nil, err
	}
	add := func(r json.RawMessage) {
		if len(r) > 0 && string(r) != "null" {
			refs = append(refs, string(r))
		}
	}
	for _, p := range d.Panels {
		add(p.Datasource)
		for _, tg := range p.Targets {
			add(tg.Datasource)
		}
	}
	for _, v := range d.Templating.List {
		add(v.Datasource)
		if v.Type == "datasource" {
			if err := json.Unmarshal(v.Query, &variableType); err != nil {
				return nil, "", nil, fmt.Errorf("datasource variable query %s: %w", v.Query, err)
			}
			variableCurrent = v.Current
		}
	}
	return refs, variableType, variableCurrent, nil
}

// checkGrafana checks the provisioning files in dir (a copy of deploy/monitoring) against the
// dashboard and the Prometheus config; each returned error is one finding.
func checkGrafana(dir string) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var ds datasourcesConfig
	if err := decodeYAMLStrict(dir, datasourcesFile, &ds); err != nil {
		return append(errs, err)
	}
	var dbs dashboardsConfig
	if err := decodeYAMLStrict(dir, dashboardsFile, &dbs); err != nil {
		return append(errs, err)
	}
	if ds.APIVersion != 1 || dbs.APIVersion != 1 {
		fail("apiVersion %d and %d: want 1 (Grafana's provisioning format)", ds.APIVersion, dbs.APIVersion)
	}
	if len(ds.Datasources) != 1 {
		return append(errs, fmt.Errorf("%s: %d data sources, want the one Prometheus", datasourcesFile, len(ds.Datasources)))
	}
	src := ds.Datasources[0]
	if u, err := url.Parse(src.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fail("%s: url %q is not an http(s) address", datasourcesFile, src.URL)
	}

	// The dashboard picks its data source with a variable of a plugin type and no saved
	// choice: Grafana fills it with the default data source of that type.
	b, err := os.ReadFile(filepath.Join(dir, dashboardFile))
	if err != nil {
		return append(errs, err)
	}
	refs, varType, current, err := dashboardDatasources(b)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", dashboardFile, err))
	}
	if varType != src.Type || !src.IsDefault || src.UID == "" {
		fail("the dashboard's datasource variable takes a %q data source with no saved choice; %s provisions %q (type %q, isDefault %v, uid %q): want the default of that type, with a uid",
			varType, datasourcesFile, src.Name, src.Type, src.IsDefault, src.UID)
	}
	if len(current) > 0 && current["value"] != src.UID && current["text"] != src.Name {
		fail("the dashboard's datasource variable is saved as %v, not the provisioned %q", current, src.UID)
	}
	for _, r := range refs {
		var ref struct{ Type, UID string }
		if err := json.Unmarshal([]byte(r), &ref); err != nil {
			fail("%s: datasource %s: %v", dashboardFile, r, err)
			continue
		}
		if ref.Type != src.Type || (ref.UID != "${datasource}" && ref.UID != src.UID) {
			fail("%s: datasource %s is neither the ${datasource} variable nor the provisioned %s %q", dashboardFile, r, src.Type, src.UID)
		}
	}
	var prom struct {
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
		} `yaml:"global"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, servicesConfig)); err != nil {
		fail("%v", err)
	} else if err := yaml.Unmarshal(b, &prom); err != nil {
		fail("%s: %v", servicesConfig, err)
	} else if src.JSONData.TimeInterval != prom.Global.ScrapeInterval {
		fail("%s: timeInterval %q, want Prometheus's scrape_interval %q ($__rate_interval builds on it)", datasourcesFile, src.JSONData.TimeInterval, prom.Global.ScrapeInterval)
	}

	// The provider's path is where the grafana directory is installed; Grafana loads every
	// .json below it, which must be exactly the dashboards here.
	if len(dbs.Providers) != 1 {
		return append(errs, fmt.Errorf("%s: %d providers, want 1", dashboardsFile, len(dbs.Providers)))
	}
	p := dbs.Providers[0]
	if p.Type != "file" || p.Options.Path != grafanaInstall {
		fail("%s: provider type %q path %q, want type file at %s (where deploy/monitoring/grafana is installed)", dashboardsFile, p.Type, p.Options.Path, grafanaInstall)
	}
	var loaded []string
	root := filepath.Join(dir, filepath.Dir(dashboardFile))
	if err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			rel, _ := filepath.Rel(root, path)
			loaded = append(loaded, rel)
		}
		return err
	}); err != nil {
		fail("%v", err)
	}
	if want := []string{filepath.Base(dashboardFile)}; !slices.Equal(loaded, want) {
		fail("the provider would load %v from %s, want %v", loaded, grafanaInstall, want)
	}
	return errs
}

func TestGrafanaProvisioning(t *testing.T) {
	for _, err := range checkGrafana(".") {
		t.Error(err)
	}
}

// copyMonitoring copies the files checkGrafana reads into a temporary directory, with one
// file's text replaced.
func copyMonitoring(t *testing.T, file, from, to string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{datasourcesFile, dashboardsFile, dashboardFile, servicesConfig} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if f == file {
			if !strings.Contains(s, from) {
				t.Fatalf("%s has no %q", f, from)
			}
			s = strings.Replace(s, from, to, 1)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Each broken link is found: a misspelt field (which Grafana would ignore), a data source of
// another type or not the default, a provider path elsewhere, a panel naming another data
// source, a time interval apart from the scrape interval.
func TestGrafanaProvisioningRefuses(t *testing.T) {
	for name, c := range map[string]struct{ file, from, to, want string }{
		"misspelt field":     {datasourcesFile, "isDefault: true", "isDefualt: true", "field isDefualt not found"},
		"misspelt option":    {dashboardsFile, "path: /etc/grafana/shardmart", "paths: /etc/grafana/shardmart", "field paths not found"},
		"other type":         {datasourcesFile, "type: prometheus", "type: loki", `provisions "Prometheus" (type "loki"`},
		"not the default":    {datasourcesFile, "isDefault: true", "isDefault: false", "isDefault false"},
		"provider elsewhere": {dashboardsFile, "path: /etc/grafana/shardmart", "path: /var/lib/grafana/dashboards", "want type file at /etc/grafana/shardmart"},
		"panel data source":  {dashboardFile, `"uid": "${datasource}"`, `"uid": "some-other"`, "is neither the ${datasource} variable"},
		"time interval":      {datasourcesFile, "timeInterval: 30s", "timeInterval: 15s", "want Prometheus's scrape_interval"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := checkGrafana(copyMonitoring(t, c.file, c.from, c.to))
			if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), c.want) }) {
				t.Fatalf("findings %v, want one saying %q", errs, c.want)
			}
			t.Log(errs[0])
		})
	}
}

// kubernetesSD is the Kubernetes discovery block of the services config, decoded strictly
// (the fields of Prometheus's kubernetes_sd_config it uses).
type kubernetesSD struct {
	Role       string `yaml:"role"`
	Namespaces *struct {
		Names []string `yaml:"names"`
	} `yaml:"namespaces,omitempty"`
}

// promtoolServices runs `promtool check config` on the services config. Debian's Prometheus
// is built without Kubernetes discovery, so its promtool refuses kubernetes_sd_configs: each
// such block is decoded strictly here and replaced, in a copy, by a static target, so that
// promtool checks everything else (the jobs, the relabelling rules, the rule file).
func promtoolServices(t *testing.T, text string) (string, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return "", fmt.Errorf("%s: %w", servicesConfig, err)
	}
	blocks := 0
	for _, job := range mappingValue(mappingValue(doc.Content[0], "scrape_configs"), "").Content {
		for i := 0; i+1 < len(job.Content); i += 2 {
			if job.Content[i].Value != "kubernetes_sd_configs" {
				continue
			}
			blocks++
			var sd []kubernetesSD
			if err := decodeNodeStrict(job.Content[i+1], &sd); err != nil {
				return "", fmt.Errorf("kubernetes_sd_configs: %w", err)
			}
			if len(sd) != 1 || sd[0].Role != "pod" {
				return "", fmt.Errorf("kubernetes_sd_configs %+v: want one of role pod (the annotations are on the pods)", sd)
			}
			var static yaml.Node
			if err := yaml.Unmarshal([]byte("[{targets: ['pod.example.internal:8080']}]"), &static); err != nil {
				t.Fatal(err)
			}
			job.Content[i].Value, job.Content[i+1] = "static_configs", static.Content[0]
		}
	}
	if blocks == 0 {
		t.Fatalf("%s: no kubernetes_sd_configs", servicesConfig)
	}
	edited, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{servicesConfig: edited}
	for _, f := range ruleFiles {
		files[f] = nil
	}
	for f, b := range files {
		if b == nil {
			if b, err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return runErr(t, "promtool", "prometheus", "check", "config", filepath.Join(dir, servicesConfig))
}

// mappingValue is the value of key in a YAML mapping node (an empty node when absent); key ""
// returns n itself.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if key == "" {
		return n
	}
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return &yaml.Node{}
}

// decodeNodeStrict decodes a YAML node, refusing a field v does not have.
func decodeNodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// annotationKey finds the prometheus.io/* pod annotations of the Kubernetes manifests.
var annotationKey = regexp.MustCompile(`(?m)^\s+(prometheus\.io/[a-z]+):`)

func TestPrometheusServicesConfig(t *testing.T) {
	b, err := os.ReadFile(servicesConfig)
	if err != nil {
		t.Fatal(err)
	}
	out, err := promtoolServices(t, string(b))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("SUCCESS: %d rule files found", len(ruleFiles)); !strings.Contains(out, want) {
		t.Errorf("%s does not load the %d rule files:\n%s", servicesConfig, len(ruleFiles), out)
	}
	// Every annotation the pods carry is read by the relabelling, under Prometheus's name for it.
	manifests, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestsDir, err)
	}
	seen := map[string]bool{}
	for _, f := range manifests {
		mb, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range annotationKey.FindAllStringSubmatch(string(mb), -1) {
			seen[m[1]] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("the manifests carry annotations %v, want prometheus.io/scrape, port and path", seen)
	}
	sanitize := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	for a := range seen {
		if meta := "__meta_kubernetes_pod_annotation_" + sanitize.ReplaceAllString(a, "_"); !strings.Contains(string(b), meta) {
			t.Errorf("%s: the pods' annotation %s (%s) is read by no relabelling rule", servicesConfig, a, meta)
		}
	}
}

// The promtool check fails on a broken relabelling rule and on a misspelt discovery field.
func TestPrometheusServicesConfigRefuses(t *testing.T) {
	b, err := os.ReadFile(servicesConfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to string }{
		"relabel action": {"action: keep\n", "action: kep\n"},
		"sd field":       {"- role: pod", "- rol: pod"},
		"sd role":        {"- role: pod", "- role: node"},
		"scrape timeout": {"scrape_timeout: 25s\n    kubernetes_sd_configs", "scrape_timeout: 45s\n    kubernetes_sd_configs"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(b), c.from) {
				t.Fatalf("%s has no %q", servicesConfig, c.from)
			}
			out, err := promtoolServices(t, strings.Replace(string(b), c.from, c.to, 1))
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			t.Log(err)
		})
	}
}
