package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// TestBenchProvisionsThousandsOfUsersInSeconds: the bench's 2,000 default users and their
// sessions go straight into the in-process server's store with one bcrypt hash, in well under
// a minute (through the API that was 4,000 bcrypt operations); every token is a working
// session, and the users log in through the API with the bench password like anyone else.
func TestBenchProvisionsThousandsOfUsersInSeconds(t *testing.T) {
	var o benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, bo benchOptions) error { o = bo; return nil })
	if err := execUnderRoot(t, cmd, "bench"); err != nil {
		t.Fatal(err)
	}
	users := o.usersFor(loadgen.WorkloadPopulation)
	ctx := context.Background()
	addr, s, stop, err := startBenchServer(ctx, o, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	emails := make([]string, users)
	for i := range emails {
		emails[i] = fmt.Sprintf("provision-%d@example.com", i)
	}
	start := time.Now()
	tokens, err := storeProvisioner(s.Stores.Users, s.Sessions)(ctx, emails, loadgen.BenchPassword)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("provisioned %d users with sessions in %s", len(tokens), took)
	if took > time.Minute {
		t.Errorf("provisioning %d users took %s, want seconds", len(emails), took)
	}
	base := "http://" + addr
	call := func(method, path, token string, body any) (int, string) {
		req, err := loadgen.NewRequest(ctx, method, base+path, token, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	seen := map[string]bool{}
	for i, tok := range tokens {
		if tok == "" || seen[tok] {
			t.Fatalf("token %d: %q empty or repeated", i, tok)
		}
		seen[tok] = true
	}
	for _, i := range []int{0, 1, len(tokens) / 2, len(tokens) - 1} {
		if st, b := call("GET", "/v1/cart", tokens[i], nil); st != http.StatusOK {
			t.Errorf("user %d's session: GET /v1/cart %d %s", i, st, b)
		}
	}
	st, b := call("POST", "/v1/sessions", "", nil)
	var guest struct{ Token string }
	if err := json.Unmarshal([]byte(b), &guest); err != nil || st != http.StatusCreated {
		t.Fatalf("POST /v1/sessions: %d %s", st, b)
	}
	st, b = call("POST", "/v1/login", guest.Token, map[string]string{"email": emails[7], "password": loadgen.BenchPassword})
	if st != http.StatusOK {
		t.Errorf("a provisioned user's login through the API: %d %s", st, b)
	}
}

// TestBenchDatabaseProcesses: --db-dir finds the pidfiles `cassandra up` and `mongo up` write
// under their directory, --db-pid adds pids as given, and a directory without any is refused.
func TestBenchDatabaseProcesses(t *testing.T) {
	dir := t.TempDir()
	for path, pid := range map[string]string{"node1/cassandra.pid": "101\n", "m0/mongod.pid": "202", "m0/other.pid": "303"} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(pid), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := databaseProcesses([]int{7}, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []loadgen.Process{{Name: "database", PID: 7}, {Name: "mongod m0", PID: 202}, {Name: "cassandra node1", PID: 101}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("processes %v, want %v", got, want)
	}
	if _, err := databaseProcesses(nil, []string{t.TempDir()}); err == nil {
		t.Error("a directory without pidfiles was accepted")
	}
}
