// Package mongodb_test checks the local sharded cluster in compose.yaml and
// its init scripts without Docker: it parses them and asserts the topology
// and the init's behaviour that the compose file cannot show by itself.
package mongodb_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type service struct {
	Image     string                       `yaml:"image"`
	Command   []string                     `yaml:"command"`
	DependsOn map[string]map[string]string `yaml:"depends_on"`
	Volumes   []string                     `yaml:"volumes"`
}

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// flag returns the value after name in a command line, or "" and false.
func flag(cmd []string, name string) (string, bool) {
	for i, a := range cmd {
		if a == name && i+1 < len(cmd) {
			return cmd[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// mongods maps replica set name → "service:port" of its members, and
// returns the config server set's name.
func mongods(t *testing.T, c compose) (sets map[string][]string, configSet string) {
	t.Helper()
	sets = map[string][]string{}
	for name, s := range c.Services {
		if len(s.Command) == 0 || s.Command[0] != "mongod" {
			continue
		}
		rs, ok := flag(s.Command, "--replSet")
		if !ok {
			t.Errorf("%s: mongod without --replSet", name)
			continue
		}
		port, _ := flag(s.Command, "--port")
		sets[rs] = append(sets[rs], name+":"+port)
		switch {
		case slices.Contains(s.Command, "--configsvr"):
			if configSet != "" && configSet != rs {
				t.Errorf("two config server sets: %s and %s", configSet, rs)
			}
			configSet = rs
		case !slices.Contains(s.Command, "--shardsvr"):
			t.Errorf("%s: mongod is neither --configsvr nor --shardsvr", name)
		}
	}
	for _, m := range sets {
		slices.Sort(m)
	}
	return sets, configSet
}

func TestComposeTopology(t *testing.T) {
	c := loadCompose(t)
	sets, cfg := mongods(t, c)
	if cfg == "" {
		t.Fatal("no config server replica set (--configsvr)")
	}
	var shards []string
	for rs, members := range sets {
		if rs == cfg {
			continue
		}
		shards = append(shards, rs)
		if len(members) != 3 {
			t.Errorf("shard replica set %s has %d members %v, want 3", rs, len(members), members)
		}
	}
	slices.Sort(shards)
	if want := []string{"shard1", "shard2", "shard3"}; !slices.Equal(shards, want) {
		t.Errorf("shard replica sets %v, want %v (docs/mongodb.md and the spec's tiers name shard1..shard3)", shards, want)
	}
	// rs-init must wait for every mongod to be healthy.
	init := c.Services["rs-init"]
	for _, members := range sets {
		for _, m := range members {
			svc, _, _ := strings.Cut(m, ":")
			if init.DependsOn[svc]["condition"] != "service_healthy" {
				t.Errorf("rs-init does not wait for %s to be healthy", svc)
			}
			if len(c.Services[svc].Volumes) == 0 {
				t.Errorf("%s has no data volume", svc)
			}
		}
	}
	// mongos names the config server set and its members.
	configdb, _ := flag(c.Services["mongos"].Command, "--configdb")
	if want := cfg + "/" + strings.Join(sets[cfg], ","); configdb != want {
		t.Errorf("mongos --configdb %q, want %q", configdb, want)
	}
}

func TestEveryMongodHasACacheLimit(t *testing.T) {
	c := loadCompose(t)
	n := 0
	for name, s := range c.Services {
		if len(s.Command) == 0 || s.Command[0] != "mongod" {
			continue
		}
		n++
		v, ok := flag(s.Command, "--wiredTigerCacheSizeGB")
		if !ok {
			t.Errorf("%s: no --wiredTigerCacheSizeGB (default is half the RAM per mongod)", name)
			continue
		}
		gb, err := strconv.ParseFloat(v, 64)
		if err != nil || gb < 0.25 || gb > 1 {
			t.Errorf("%s: --wiredTigerCacheSizeGB %q, want 0.25..1", name, v)
		}
	}
	if n != 10 {
		t.Errorf("%d mongod services, want 10 (1 config server + 3 shards × 3)", n)
	}
}

// initConfigs returns the replica set configs the init script passes to
// initiate, as JavaScript object literals.
func initConfigs(t *testing.T, script string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^initiate '(\{.*\})'$`).FindAllStringSubmatch(script, -1) {
		out = append(out, m[1])
	}
	return out
}

func readInit(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("init", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	setID   = regexp.MustCompile(`^\{_id: "([^"]+)"`)
	members = regexp.MustCompile(`\{_id: (\d+), host: "([^"]+)"((?:, priority: \d+)?)\}`)
)

func TestInitConfigsMatchComposeAndPreferMember0(t *testing.T) {
	c := loadCompose(t)
	sets, cfg := mongods(t, c)
	script := readInit(t, "replica-sets.sh")
	configs := initConfigs(t, script)
	if len(configs) != len(sets) {
		t.Fatalf("init initiates %d replica sets, compose runs %d", len(configs), len(sets))
	}
	seen := map[string]bool{}
	for _, conf := range configs {
		id := setID.FindStringSubmatch(conf)
		if id == nil {
			t.Errorf("config %s: no _id", conf)
			continue
		}
		seen[id[1]] = true
		if (id[1] == cfg) != strings.Contains(conf, "configsvr: true") {
			t.Errorf("%s: configsvr: true must be set exactly on the config server set", id[1])
		}
		var hosts []string
		for i, m := range members.FindAllStringSubmatch(conf, -1) {
			hosts = append(hosts, m[2])
			if m[1] != strconv.Itoa(i) {
				t.Errorf("%s: member %d has _id %s", id[1], i, m[1])
			}
			want := ""
			if i == 0 {
				want = ", priority: 2"
			}
			if m[3] != want {
				t.Errorf("%s member %d (%s): priority %q, want %q (member 0 priority 2, the rest default)", id[1], i, m[2], m[3], want)
			}
		}
		slices.Sort(hosts)
		if !slices.Equal(hosts, sets[id[1]]) {
			t.Errorf("%s: init members %v, compose members %v", id[1], hosts, sets[id[1]])
		}
	}
	for rs := range sets {
		if !seen[rs] {
			t.Errorf("replica set %s is never initiated", rs)
		}
	}
	// add-shards adds every shard set with all its members.
	add := readInit(t, "add-shards.sh")
	for rs, ms := range sets {
		if rs == cfg {
			continue
		}
		var want []string
		for _, m := range ms {
			want = append(want, m)
		}
		if s := `["` + rs + `", "` + rs + "/" + strings.Join(want, ",") + `"]`; !strings.Contains(add, s) {
			t.Errorf("add-shards.sh does not add %s", s)
		}
	}
}

func TestInitWaitsForAnyPrimaryAndIsIdempotent(t *testing.T) {
	script := readInit(t, "replica-sets.sh")
	for _, bad := range []string{"db.hello().isWritablePrimary", "rs.initiate("} {
		if strings.Contains(script, bad) {
			t.Errorf("init still uses %s on one named member", bad)
		}
	}
	for _, want := range []string{
		"replSetGetStatus",     // reads each member's view of the set
		"m.state === 1",        // PRIMARY, on any member
		"NotYetInitialized",    // a fresh member: initiate it
		"'AlreadyInitialized'", // initiated meanwhile: success
		"quit(1)",              // bounded wait: fail instead of hanging
		"directConnection=true",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("init script lacks %q", want)
		}
	}
	// mongosh awaits a shell call only where its value is used: inside try,
	// "return conn...runCommand(...)" lets a server error escape the catch
	// (seen with mongosh 2.12: "no replset config has been received").
	if regexp.MustCompile(`return\s+conns\[[^\]]+\]\.getDB`).MatchString(script) {
		t.Error("init returns a shell call directly inside try: assign it first so its error is caught")
	}
	if _, err := exec.LookPath("sh"); err == nil {
		if out, err := exec.Command("sh", "-n", filepath.Join("init", "replica-sets.sh")).CombinedOutput(); err != nil {
			t.Errorf("sh -n replica-sets.sh: %v\n%s", err, out)
		}
		if out, err := exec.Command("sh", "-n", filepath.Join("init", "add-shards.sh")).CombinedOutput(); err != nil {
			t.Errorf("sh -n add-shards.sh: %v\n%s", err, out)
		}
	}
}
