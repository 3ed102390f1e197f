package cli

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The lag monitor's own login reaches placement.Options from flags or the environment.
func TestMongoMonitorCredentialFlags(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	var b backendFlags
	b.register(cmd)
	if err := cmd.Flags().Parse([]string{"--mongo-uri", "mongodb://app:pw@mongos:27017", "--mongo-monitor-user", "lagmon"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARDMART_MONGO_MONITOR_PASSWORD", "s3cret")
	t.Setenv("SHARDMART_MONGO_MONITOR_USER", "ignored: the flag wins")
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	cfg, err := b.config(slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backends.MongoMonitorUser != "lagmon" || cfg.Backends.MongoMonitorPassword != "s3cret" {
		t.Errorf("monitor credentials %q/%q, want lagmon/s3cret", cfg.Backends.MongoMonitorUser, cfg.Backends.MongoMonitorPassword)
	}
	for _, name := range []string{"mongo-monitor-user", "mongo-monitor-password"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || !strings.Contains(f.Usage, "SHARDMART_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))) {
			t.Errorf("flag --%s missing or its help does not name its environment variable", name)
		}
	}
}
