package cli

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// The set's lifecycle is tested against real mongods in internal/mongodb/launcher; these cover
// the command surface, and `up` for real on a spare port.

func TestMongoLocalCommandsWithoutSet(t *testing.T) {
	dir := t.TempDir()
	if _, err := runMongo(t, "status", "--dir", dir); !errors.Is(err, launcher.ErrNoSet) {
		t.Errorf("status without a set: %v, want ErrNoSet", err)
	}
	out, err := runMongo(t, "down", "--dir", dir)
	if err != nil || !strings.Contains(out, "no replica set to stop") {
		t.Errorf("down without a set: %q, %v; want a no-op", out, err)
	}
}

func TestMongoUpValidatesFlags(t *testing.T) {
	for _, args := range [][]string{{"--nodes", "2"}, {"--port", "80"}, {"--keyfile", "k"}, {"--admin-password-file", "p"},
		{"--tls-ca-file", "ca.pem"}, {"--tls", "--tls-ca-file", "ca.pem"}} {
		var called bool
		cmd := newCmdMongoUp(IO{}, func(context.Context, mongoUpOptions) error { called = true; return nil })
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil || called {
			t.Errorf("up %v: err %v, ran %t; want a refusal before anything starts", args, err, called)
		}
	}
}

// `mongo up` prints the set's URI as its last line, `status` shows the member, `down` stops it.
func TestMongoUpStatusDown(t *testing.T) {
	dir := t.TempDir()
	port := launcher.ServeTestPort + 10
	out, err := runMongo(t, "up", "--dir", dir, "--port", itoa(port))
	t.Cleanup(func() {
		if s, err := launcher.Open(dir, nil); err == nil {
			s.KillAll()
		}
	})
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "mongodb://127.0.0.1:"+itoa(port)+"/?replicaSet=rs0" {
		t.Fatalf("last line of up: %q", last)
	}
	out, err = runMongo(t, "status", "--dir", dir)
	if err != nil || !strings.Contains(out, "PRIMARY") || !strings.Contains(out, launcher.DefaultVersion) {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// A sharded cluster in the set's directory is refused before anything starts.
	_, err = runMongo(t, "up", "--dir", dir, "--port", itoa(port+2), "--shards", "1")
	if !errors.Is(err, launcher.ErrOtherTopology) || !strings.Contains(err.Error(), dir+" holds a replica set rs0 of 1 member(s)") {
		t.Fatalf("up --shards 1 in the set's directory: %v; want a refusal saying what it holds", err)
	}
	if out, err = runMongo(t, "down", "--dir", dir); err != nil || !strings.Contains(out, "stopped") {
		t.Fatalf("down: %v\n%s", err, out)
	}
	out, _ = runMongo(t, "status", "--dir", dir)
	if !strings.Contains(out, "DOWN") {
		t.Fatalf("status after down:\n%s", out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// `mongo up --shards 2` starts a config server and two shards, says there is no router, and
// prints the config server's URI last; status shows the registered shards; down stops all.
func TestMongoUpShardsStatusDown(t *testing.T) {
	dir := t.TempDir()
	port := launcher.ServeTestPort + 50 // config server; shards at +10 and +20
	out, err := runMongo(t, "up", "--dir", dir, "--port", itoa(port), "--shards", "2", "--chunk-size-mb", "1")
	t.Cleanup(func() {
		if c, err := launcher.OpenCluster(dir, nil); err == nil {
			c.KillAll()
		}
	})
	if err != nil {
		t.Fatalf("up --shards: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "mongodb://127.0.0.1:"+itoa(port)+"/?replicaSet=cfg" {
		t.Fatalf("last line of up --shards: %q", last)
	}
	if !strings.Contains(out, "NO router") || !strings.Contains(out, "sh1") {
		t.Errorf("up --shards does not show the shards or say there is no router:\n%s", out)
	}
	out, err = runMongo(t, "status", "--dir", dir)
	if err != nil || !strings.Contains(out, "registered shards: sh0, sh1") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if out, err = runMongo(t, "down", "--dir", dir); err != nil || !strings.Contains(out, "sharded cluster stopped") {
		t.Fatalf("down: %v\n%s", err, out)
	}
	c, err := launcher.OpenCluster(dir, nil)
	if err != nil || c.Running() {
		t.Errorf("after down: %v, running %v", err, c != nil && c.Running())
	}
}
