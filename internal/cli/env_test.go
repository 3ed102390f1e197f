package cli

import (
	"context"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// execUnderRoot runs cmd under a bare root, so it gets the real tree's environment handling.
func execUnderRoot(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.AddCommand(cmd)
	root.SetArgs(args)
	return root.Execute()
}

func serveOptionsFor(t *testing.T, args ...string) serveOptions {
	t.Helper()
	var got serveOptions
	cmd := newCmdServe(IO{}, func(_ context.Context, o serveOptions) error { got = o; return nil })
	if err := execUnderRoot(t, cmd, append([]string{"serve"}, args...)...); err != nil {
		t.Fatalf("serve %v: %v", args, err)
	}
	return got
}

// SHARDMART_SEED=7, meant for advise --seed, once made serve fail to start
// (strconv.ParseBool on --seed). It is no deployment setting and reaches no flag now.
func TestEnvSeedDoesNotReachServe(t *testing.T) {
	t.Setenv("SHARDMART_SEED", "7")
	if o := serveOptionsFor(t); !o.seed {
		t.Errorf("serve --seed = false with SHARDMART_SEED=7, want the default true")
	}
}

// SHARDMART_FORCE once reached both seed --force and mongo move-range --force.
func TestEnvForceReachesNeitherSeedNorMoveRange(t *testing.T) {
	t.Setenv("SHARDMART_FORCE", "true")
	var seed seedOptions
	if err := execUnderRoot(t, newCmdSeed(IO{}, func(_ context.Context, o seedOptions) error { seed = o; return nil }), "seed"); err != nil {
		t.Fatal(err)
	}
	if seed.force {
		t.Error("seed --force set by SHARDMART_FORCE")
	}
	var move mongoMoveRangeOptions
	cl := &mongoClusterOptions{}
	group := newMongoGroup(cl, newCmdMongoMoveRange(IO{}, cl, func(_ context.Context, o mongoMoveRangeOptions) error { move = o; return nil }))
	if err := execUnderRoot(t, group, "mongo", "move-range", "orders", "--to", "shard1"); err != nil {
		t.Fatal(err)
	}
	if move.Force {
		t.Error("mongo move-range --force set by SHARDMART_FORCE")
	}
}

// A deployment setting still comes from the environment, and a flag on the command line wins.
func TestEnvDeploymentSettingsAndFlagWins(t *testing.T) {
	t.Setenv("SHARDMART_ADDR", "127.0.0.1:9191")
	t.Setenv("SHARDMART_MONGO_URI", "mongodb://env-host:27017")
	t.Setenv("SHARDMART_PLACEMENT", "carts=cassandra")
	o := serveOptionsFor(t)
	if o.addr != "127.0.0.1:9191" || o.backend.mongoURI != "mongodb://env-host:27017" || o.backend.placement != "carts=cassandra" {
		t.Errorf("from the environment: addr %q, mongo-uri %q, placement %q", o.addr, o.backend.mongoURI, o.backend.placement)
	}
	o = serveOptionsFor(t, "--addr", ":7070", "--mongo-uri", "mongodb://flag-host")
	if o.addr != ":7070" || o.backend.mongoURI != "mongodb://flag-host" {
		t.Errorf("flags given: addr %q, mongo-uri %q; want the flags over the environment", o.addr, o.backend.mongoURI)
	}
	// The mongo group's --uri is the same deployment setting.
	var move mongoMoveRangeOptions
	cl := &mongoClusterOptions{}
	group := newMongoGroup(cl, newCmdMongoMoveRange(IO{}, cl, func(_ context.Context, o mongoMoveRangeOptions) error { move = o; return nil }))
	if err := execUnderRoot(t, group, "mongo", "move-range", "orders", "--to", "shard1"); err != nil {
		t.Fatal(err)
	}
	if move.Cluster.URI != "mongodb://env-host:27017" {
		t.Errorf("mongo --uri %q, want SHARDMART_MONGO_URI's", move.Cluster.URI)
	}
}

// Only deploymentEnv's variables are read, each by at least one flag, and the configuration
// reference lists exactly them.
func TestEnvAllowListIsUsedAndDocumented(t *testing.T) {
	used := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if env := f.Annotations[envAnnotation]; len(env) > 0 {
				used[env[0]] = append(used[env[0]], c.CommandPath()+" --"+f.Name)
			}
		}
		c.LocalFlags().VisitAll(visit)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(IO{}))
	for _, env := range deploymentEnv {
		if slices.Contains(flaglessEnv, env) {
			if len(used[env]) > 0 {
				t.Errorf("%s is read directly but also by %v", env, used[env])
			}
			continue
		}
		if len(used[env]) == 0 {
			t.Errorf("%s is in deploymentEnv but no flag reads it", env)
		}
	}
	if !slices.ContainsFunc(used["SHARDMART_ADDR"], func(s string) bool { return s == "shardmart serve --addr" }) {
		t.Errorf("SHARDMART_ADDR is read by %v, want serve --addr", used["SHARDMART_ADDR"])
	}
	// The configuration reference is generated from deploymentEnv (internal/docgen), which
	// keeps it current; this catches a variable added without a flag or a description.
	b, err := os.ReadFile("../../docs/reference/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	for _, env := range flaglessEnv {
		if FlaglessEnvUsage(env) == "" {
			t.Errorf("%s is read directly but has no description in flaglessEnvUsage", env)
		}
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(SHARDMART_[A-Z_]+)`").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	want := slices.Clone(deploymentEnv)
	slices.Sort(want)
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("docs/reference/configuration.md lists %v, want deploymentEnv %v (regenerate: go run ./internal/docgen)", listed, want)
	}
}
