package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const amConfig = "alertmanager/alertmanager.yml"

func TestAmtoolCheckConfig(t *testing.T) {
	run(t, "amtool", "prometheus-alertmanager", "check-config", amConfig)
}

// The documented render step must produce a config amtool accepts, with every placeholder gone.
func TestAlertmanagerRender(t *testing.T) {
	cmd := exec.Command("sh", "alertmanager/render.sh")
	cmd.Env = append(os.Environ(),
		"SHARDMART_ALERT_EMAIL=dba@example.com",
		"SHARDMART_SMTP_SMARTHOST=127.0.0.1:2525",
		"SHARDMART_SMTP_REQUIRE_TLS=false")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.sh: %v", err)
	}
	var c struct {
		Global    map[string]any `yaml:"global"`
		Receivers []struct {
			EmailConfigs []struct {
				To string `yaml:"to"`
			} `yaml:"email_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(out, &c); err != nil {
		t.Fatalf("rendered config: %v\n%s", err, out)
	}
	want := map[string]any{"smtp_smarthost": "127.0.0.1:2525", "smtp_from": "alertmanager@example.com", "smtp_require_tls": false}
	for k, v := range want {
		if c.Global[k] != v {
			t.Errorf("rendered global.%s = %v, want %v", k, c.Global[k], v)
		}
	}
	if len(c.Receivers) == 0 || len(c.Receivers[0].EmailConfigs) == 0 || c.Receivers[0].EmailConfigs[0].To != "dba@example.com" {
		t.Errorf("rendered receiver does not mail dba@example.com: %+v", c.Receivers)
	}
	f := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(f, out, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "amtool", "prometheus-alertmanager", "check-config", f)

	bad := exec.Command("sh", "alertmanager/render.sh")
	bad.Env = append(os.Environ(), "SHARDMART_ALERT_EMAIL=x'y@example.com", "SHARDMART_SMTP_SMARTHOST=h:25")
	if b, err := bad.CombinedOutput(); err == nil {
		t.Errorf("render.sh accepted a quote in the address:\n%s", b)
	}
}

// Every (team, severity) the rules use reaches the team's e-mail receiver; mails are grouped per
// hot (namespace, shard) and say when the alert resolved.
func TestAlertmanagerRoutesEveryRule(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		labels := []string{"alertname=" + r.Alert, "team=" + r.Labels["team"], "severity=" + r.Labels["severity"]}
		key := strings.Join(labels[1:], ",")
		if seen[key] {
			continue
		}
		seen[key] = true
		run(t, "amtool", "prometheus-alertmanager", append([]string{"config", "routes", "test",
			"--config.file=" + amConfig, "--verify.receivers=shardmart-data-email"}, labels...)...)
	}

	b, err := os.ReadFile(amConfig)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Route struct {
			GroupBy []string `yaml:"group_by"`
		} `yaml:"route"`
		Receivers []struct {
			Name         string `yaml:"name"`
			EmailConfigs []struct {
				SendResolved bool `yaml:"send_resolved"`
			} `yaml:"email_configs"`
		} `yaml:"receivers"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if want := []string{"alertname", "namespace", "shard"}; !slices.Equal(c.Route.GroupBy, want) {
		t.Errorf("route.group_by = %v, want %v", c.Route.GroupBy, want)
	}
	for _, r := range c.Receivers {
		if len(r.EmailConfigs) == 0 {
			t.Errorf("receiver %s sends no e-mail", r.Name)
		}
		for _, e := range r.EmailConfigs {
			if !e.SendResolved {
				t.Errorf("receiver %s: send_resolved is off", r.Name)
			}
		}
	}
}
