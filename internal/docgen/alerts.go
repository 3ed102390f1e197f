package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ruleFile is the part of a Prometheus rule file the reference shows.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// rulesDir holds the rule files Prometheus loads (deploy/monitoring/prometheus/prometheus.yml).
const rulesDir = "deploy/monitoring/rules"

// genAlerts renders every alert and recording rule of the shipped rule files.
func genAlerts(root string, pages map[string][]byte) error {
	files, err := filepath.Glob(filepath.Join(root, rulesDir, "*.rules.yml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no rule files in %s", rulesDir)
	}
	slices.Sort(files)
	var b strings.Builder
	b.WriteString(header("Alert rules", "the rule files in "+rulesDir))
	b.WriteString("Prometheus loads these files (`deploy/monitoring/prometheus/prometheus.yml`); Alertmanager routes\n" +
		"the alerts by `severity`. Each rule is unit-tested with `promtool test rules` (the `*.rules.test.yml`\n" +
		"files beside them). Setting them up: [Watch for hot shards](../guides/hot-shards.md).\n")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var rf ruleFile
		if err := yaml.Unmarshal(raw, &rf); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		fmt.Fprintf(&b, "\n## %s\n", filepath.Base(f))
		for _, g := range rf.Groups {
			fmt.Fprintf(&b, "\n### Group `%s`\n", g.Name)
			var records []string
			for _, r := range g.Rules {
				if r.Record != "" {
					records = append(records, "`"+r.Record+"`")
					continue
				}
				fmt.Fprintf(&b, "\n#### %s\n\n", r.Alert)
				var keys []string
				for k := range r.Labels {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				var labels []string
				for _, k := range keys {
					labels = append(labels, k+"="+r.Labels[k])
				}
				forTime := r.For
				if forTime == "" {
					forTime = "0s"
				}
				fmt.Fprintf(&b, "- for: `%s`; labels: `%s`\n", forTime, strings.Join(labels, ", "))
				for _, a := range []string{"summary", "description", "action"} {
					if v := r.Annotations[a]; v != "" {
						fmt.Fprintf(&b, "- %s: %s\n", a, strings.ReplaceAll(strings.TrimSpace(v), "\n", " "))
					}
				}
				fmt.Fprintf(&b, "\n```promql\n%s\n```\n", strings.TrimRight(r.Expr, "\n"))
			}
			if len(records) > 0 {
				fmt.Fprintf(&b, "\nRecording rules of this group: %s.\n", strings.Join(records, ", "))
			}
		}
	}
	pages[path.Join(refDir, "alerts.md")] = []byte(b.String())
	return nil
}
