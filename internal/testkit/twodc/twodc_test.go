package twodc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/testkit/faultnet"
)

const (
	keyspace = "twodc"
	// The shop's role has SELECT and MODIFY on the keyspace; the reader's SELECT only.
	shopUser, shopPassword     = "shop", "shop-2dc-secret"
	readerUser, readerPassword = "reader", "reader-2dc-secret"
	// guestsPerPhase guests per shop start a session and put an item in their cart in each
	// phase; each also gets one order-history entry.
	guestsPerPhase = 8
	// convictWithin bounds how long gossip takes to mark the other side down after the cut
	// (phi convict threshold 8: about 10-20 s of silence, more on a loaded machine).
	convictWithin = 2 * time.Minute
)

// The whole story on one cluster, in order: booting four nodes is the expensive part.
func TestTwoDataCentres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := launcher.ForTest(t, launcher.Options{DCNodes: []int{3, 1}, BaseAddr: launcher.TwoDCTestAddr, Name: "shardmart-twodc",
		HeapMB: 384, Auth: true, TLS: true, BootTimeout: 6 * time.Minute, Logger: logger})
	t.Logf("boot times: %v; load %s", c.BootTimes(), loadavg())
	dc1, dc2 := c.DCs()["dc1"], c.DCs()["dc2"]
	if len(dc1) != 3 || len(dc2) != 1 {
		t.Fatalf("data centres %v, want dc1 with 3 nodes and dc2 with 1", c.DCs())
	}
	tlsFiles := cassandrastore.TLSFiles{CAFile: c.TLS().CA}
	super := cassandrastore.Connection{Username: launcher.SuperUser, Password: launcher.SuperPassword, TLS: tlsFiles}
	if _, err := cassandrastore.ApplySchema(ctx, c.Hosts(), cassandrastore.SchemaOptions{Keyspace: keyspace,
		Replication: map[string]int{"dc1": 3, "dc2": 1}, Conn: super}); err != nil {
		t.Fatal(err)
	}
	admin, err := cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-", Connection: super, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE ROLE IF NOT EXISTS %s WITH PASSWORD = '%s' AND LOGIN = true`, shopUser, shopPassword),
		fmt.Sprintf(`GRANT SELECT ON KEYSPACE %s TO %s`, keyspace, shopUser),
		fmt.Sprintf(`GRANT MODIFY ON KEYSPACE %s TO %s`, keyspace, shopUser),
		fmt.Sprintf(`CREATE ROLE IF NOT EXISTS %s WITH PASSWORD = '%s' AND LOGIN = true`, readerUser, readerPassword),
		fmt.Sprintf(`GRANT SELECT ON KEYSPACE %s TO %s`, keyspace, readerUser),
		// The last phase pins reads to one node, which must then read that node alone: no
		// speculative read of another replica when it is slow (the store's tables keep
		// Cassandra's 99p). Set while the ring is whole: a schema change sent after a restart
		// can meet a connection the restarted node closes, and DDL is not retried.
		fmt.Sprintf(`ALTER TABLE %s.sessions WITH speculative_retry = 'NONE'`, keyspace),
		fmt.Sprintf(`ALTER TABLE %s.guest_carts WITH speculative_retry = 'NONE'`, keyspace),
	} {
		if err := admin.Query(stmt).WithContext(ctx).Consistency(gocql.Quorum).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := admin.AwaitSchemaAgreement(ctx); err != nil {
		t.Fatal(err)
	}
	login := func(dc string) cassandrastore.Connection {
		return cassandrastore.Connection{Datacenter: dc, Username: shopUser, Password: shopPassword, TLS: tlsFiles}
	}

	t.Run("refusals are one line naming the cause", func(t *testing.T) {
		otherCA, err := launcher.NewCA(t.TempDir(), "not the cluster's CA")
		if err != nil {
			t.Fatal(err)
		}
		wrongPassword := login("dc1")
		wrongPassword.Password = "not-" + shopPassword
		reader := cassandrastore.Connection{Datacenter: "dc1", Username: readerUser, Password: readerPassword, TLS: tlsFiles}
		untrusted := login("dc1")
		untrusted.TLS.CAFile = otherCA.CertFile
		plain := login("dc1")
		plain.TLS = cassandrastore.TLSFiles{}
		for _, tc := range []struct {
			name string
			conn cassandrastore.Connection
			is   error
			says string
		}{
			{"wrong password", wrongPassword, cassandrastore.ErrLogin, `refused the login of user "shop": wrong user name or password`},
			{"no MODIFY grant", reader, cassandrastore.ErrPermission, "has no MODIFY permission"},
			{"untrusted certificate", untrusted, cassandrastore.ErrTLS, "not signed by the CA in " + otherCA.CertFile},
			{"plain text to a TLS cluster", plain, cassandrastore.ErrTLS, "does it require TLS"},
			{"unknown local DC", login("dc9"), nil, `local data centre "dc9" is unknown to the cluster (it has dc1, dc2)`},
		} {
			_, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: keyspace, Connection: tc.conn})
			switch {
			case err == nil:
				t.Errorf("%s: opened", tc.name)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Errorf("%s: %v, want %v", tc.name, err, tc.is)
			case !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n"):
				t.Errorf("%s: %q, want one line saying %q", tc.name, err, tc.says)
			default:
				t.Logf("%s: %v", tc.name, err)
			}
		}
	})

	shops := map[string]*dcShop{
		"dc1": openShop(ctx, t, c.Hosts(), login("dc1")),
		"dc2": openShop(ctx, t, c.Hosts(), login("dc2")),
	}
	// A shop in dc2 whose quorums span both DCs (--cassandra-quorum-every-dc).
	everyDC := login("dc2")
	everyDC.QuorumEveryDC = true
	global := openShop(ctx, t, c.Hosts(), everyDC)
	var acked []guest // every write the shops acknowledged, to look for on every node at the end

	var globalToken string
	t.Run("each DC serves its own users", func(t *testing.T) {
		for _, dc := range []string{"dc1", "dc2"} {
			acked = append(acked, shops[dc].serveGuests(ctx, t, "healthy-"+dc, guestsPerPhase)...)
		}
		// The every-DC shop's session, for its cart write during the cut.
		tok, err := global.api.startSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		globalToken = tok
		acked = append(acked, guest{dc: "dc2", label: "every-dc session", token: tok, sessionOnly: true})
	})
	if t.Failed() {
		t.FailNow()
	}

	chain := faultnet.New(t)
	cut := dc2[0]
	t.Run("cut apart, each DC serves at LOCAL_QUORUM, QUORUM answers 503", func(t *testing.T) {
		t.Logf("before the cut: %s", storageConns(ctx, cut.Addr))
		if err := chain.CutOff(ctx, cut.Addr, cut.GID, launcher.StoragePort); err != nil {
			t.Fatal(err)
		}
		// The cut holds both ways: dc2's node reaches no dc1 node, and gossip on each side
		// marks the other down.
		if err := faultnet.Dial(ctx, cut.GID, dc1[0].Addr, launcher.StoragePort, 2*time.Second); err == nil {
			t.Fatalf("dc2's node still connects to %s:%d", dc1[0].Addr, launcher.StoragePort)
		}
		if err := faultnet.Dial(ctx, 0, cut.Addr, launcher.StoragePort, 2*time.Second); err == nil {
			t.Fatalf("%s:%d still accepts connections", cut.Addr, launcher.StoragePort)
		}
		waitStatus(ctx, t, c, dc1[0].Index, cut.Addr, "DN")
		waitStatus(ctx, t, c, cut.Index, dc1[0].Addr, "DN")
		t.Logf("after the cut (packets dropped, so the sockets may stay ESTABLISHED): %s", storageConns(ctx, cut.Addr))

		for _, dc := range []string{"dc1", "dc2"} {
			acked = append(acked, shops[dc].serveGuests(ctx, t, "cut-"+dc, guestsPerPhase)...)
		}
		// The users of before the cut still have their carts in their own DC.
		for _, g := range acked {
			if g.sessionOnly {
				continue // no cart line acknowledged
			}
			if n := shops[g.dc].cartItems(ctx, t, g.token); n != 1 {
				t.Errorf("%s guest %s: %d cart lines during the cut, want 1", g.dc, g.label, n)
			}
		}
		// Quorums over both DCs: 4 replicas, 3 needed, dc2 holds 1. A new session (written at
		// QUORUM) and a cart write with the session of before the cut are both refused.
		status, hdr, body, err := global.api.doHeader(ctx, http.MethodPost, "/v1/sessions", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantQuorumRefused(t, "session create at QUORUM during the cut", status, hdr, body)
		status, hdr, body = global.api.putItem(ctx, globalToken, global.product)
		wantQuorumRefused(t, "cart write at QUORUM during the cut", status, hdr, body)
	})
	if err := chain.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatalf("after the heal: %v", err)
	}

	t.Run("a dc1 node down, LOCAL_QUORUM serves", func(t *testing.T) {
		down := dc1[2]
		if err := c.StopNode(ctx, down.Index); err != nil {
			t.Fatal(err)
		}
		waitStatus(ctx, t, c, dc1[0].Index, down.Addr, "DN")
		acked = append(acked, shops["dc1"].serveGuests(ctx, t, "node-down-dc1", guestsPerPhase)...)
		if err := c.StartNode(ctx, down.Index); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("after the heal every acknowledged write is on every node", func(t *testing.T) {
		check, err := cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: keyspace, Connection: login("")})
		if err != nil {
			t.Fatal(err)
		}
		defer check.Close()
		rows := 0
		for _, g := range acked {
			rows++
			if !g.sessionOnly {
				rows++
			}
		}
		// Hints first: the rows each node already holds once the ring is whole again.
		beforeRepair := countOnNodes(ctx, t, check, c, acked)
		if _, err := c.Repair(ctx, launcher.RepairOptions{Keyspace: keyspace,
			Tables: []string{"sessions", "guest_carts", "order_history", "order_history_buckets"}}); err != nil {
			t.Fatal(err)
		}
		afterRepair := countOnNodes(ctx, t, check, c, acked)
		for _, n := range c.Nodes() {
			t.Logf("node %d (%s, %s): %d of %d acknowledged rows after the heal (hints), %d after repair",
				n.Index+1, n.Addr, n.DC, beforeRepair[n.Index], rows, afterRepair[n.Index])
			if afterRepair[n.Index] != rows {
				t.Errorf("node %d (%s) holds %d of %d acknowledged rows after repair", n.Index+1, n.DC, afterRepair[n.Index], rows)
			}
		}
		// Each DC's shop reads every user's history, whichever DC wrote it.
		for _, dc := range []string{"dc1", "dc2"} {
			for _, g := range acked {
				if g.sessionOnly {
					continue
				}
				page, err := shops[dc].shop.Stores.History.ListHistory(ctx, g.user, paging.Request{Limit: 10})
				if err != nil || len(page.Items) != 1 {
					t.Errorf("%s shop, history of %s (written in %s): %d entries, %v; want 1", dc, g.user, g.dc, len(page.Items), err)
				}
			}
		}
		t.Logf("acknowledged: %d sessions, %d cart lines (each on every node after repair), %d history entries (read from both DCs); load %s",
			len(acked), rows-len(acked), rows-len(acked), loadavg())
	})
}

// guest is one acknowledged guest: a session and, unless sessionOnly, a cart line and an
// order-history entry.
type guest struct {
	dc, label, token, user string
	sessionOnly            bool
}

// dcShop is a shop process's stores and API, connected with one local DC: carts, sessions,
// events and history in Cassandra, the rest in its own embedded store.
type dcShop struct {
	dc      string
	shop    *shop.Shop
	api     apiClient
	product string
}

func openShop(ctx context.Context, t *testing.T, hosts []string, conn cassandrastore.Connection) *dcShop {
	t.Helper()
	pl, err := placement.Parse("carts=cassandra,sessions=cassandra,events=cassandra,history=cassandra")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	sh, err := shop.Open(ctx, shop.Config{Placement: pl, Logger: quiet, Backends: placement.Options{
		SQLitePath: filepath.Join(t.TempDir(), "shop.db"), CassandraHosts: hosts, CassandraKeyspace: keyspace, CassandraConn: conn}})
	if err != nil {
		t.Fatalf("shop in %s: %v", conn.Datacenter, err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Services: sh.API(), AdminToken: "x", Logger: quiet}))
	t.Cleanup(srv.Close)
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := catalog.Product{ID: "p-" + conn.Datacenter, Name: "two-DC product", Category: "twodc", Price: money.Amount(1500),
		Stock: map[string]int64{"eu": 100}, CreatedAt: now, UpdatedAt: now}
	if err := sh.Stores.Products.CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	return &dcShop{dc: conn.Datacenter, shop: sh, product: p.ID,
		api: apiClient{base: srv.URL, http: &http.Client{Timeout: 30 * time.Second}}}
}

// serveGuests runs n guests through the shop: a session and a cart line over HTTP, an
// order-history entry through the shop's history repository; each must be acknowledged and
// read back from this DC.
func (s *dcShop) serveGuests(ctx context.Context, t *testing.T, phase string, n int) []guest {
	t.Helper()
	var out []guest
	for i := range n {
		g := guest{dc: s.dc, label: fmt.Sprintf("%s-%d", phase, i), user: fmt.Sprintf("u-%s-%d", phase, i)}
		tok, err := s.api.startSession(ctx)
		if err != nil {
			t.Errorf("%s: start session: %v", g.label, err)
			continue
		}
		g.token = tok
		if status, _, body := s.api.putItem(ctx, tok, s.product); status != http.StatusOK {
			t.Errorf("%s: put cart item: %d %s", g.label, status, body)
			out = append(out, guest{dc: g.dc, label: g.label, token: tok, sessionOnly: true})
			continue
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		e := history.Entry{UserID: g.user, OrderID: "o-" + g.label, PlacedAt: now, UpdatedAt: now, Status: order.Created,
			Zone: "eu", Total: money.Amount(1500)}
		if err := s.shop.Stores.History.UpsertEntry(ctx, e); err != nil {
			t.Errorf("%s: history: %v", g.label, err)
			out = append(out, guest{dc: g.dc, label: g.label, token: tok, sessionOnly: true})
			continue
		}
		if n := s.cartItems(ctx, t, tok); n != 1 {
			t.Errorf("%s: %d cart lines read back, want 1", g.label, n)
		}
		page, err := s.shop.Stores.History.ListHistory(ctx, g.user, paging.Request{Limit: 10})
		if err != nil || len(page.Items) != 1 {
			t.Errorf("%s: history read back: %d entries, %v", g.label, len(page.Items), err)
		}
		out = append(out, g)
	}
	t.Logf("%s: %d guests served by the %s shop", phase, len(out), s.dc)
	return out
}

func (s *dcShop) cartItems(ctx context.Context, t *testing.T, token string) int {
	t.Helper()
	status, body, err := s.api.do(ctx, http.MethodGet, "/v1/cart", token, nil)
	if err != nil || status != http.StatusOK {
		t.Errorf("%s: GET /v1/cart: %d %s %v", s.dc, status, body, err)
		return -1
	}
	var v struct {
		Items []struct {
			ProductID string `json:"product_id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("cart: %v", err)
	}
	return len(v.Items)
}

// countOnNodes counts, per node, the acknowledged sessions and cart lines it holds: each read at
// ONE with that node as coordinator (a replica of every row: dc1 RF 3 on 3 nodes, dc2 RF 1 on 1),
// which with the dynamic snitch off reads its own data.
func countOnNodes(ctx context.Context, t *testing.T, s *gocql.Session, c *launcher.Cluster, acked []guest) map[int]int {
	t.Helper()
	ids := map[string]string{} // address -> host id
	for _, h := range s.GetHosts() {
		ids[h.ConnectAddress().String()] = h.HostID()
	}
	got := map[int]int{}
	for _, n := range c.Nodes() {
		id := ids[n.Addr]
		if id == "" {
			t.Fatalf("the driver does not know node %s", n.Addr)
		}
		for _, g := range acked {
			sid := session.IDFromToken(g.token)
			var k int
			if err := s.Query(`SELECT count(*) FROM sessions WHERE session_id = ?`, sid).WithContext(ctx).
				Consistency(gocql.One).SetHostID(id).Scan(&k); err != nil {
				t.Fatalf("node %s: %v", n.Addr, err)
			}
			got[n.Index] += k
			if g.sessionOnly {
				continue
			}
			if err := s.Query(`SELECT count(*) FROM guest_carts WHERE session_id = ?`, sid).WithContext(ctx).
				Consistency(gocql.One).SetHostID(id).Scan(&k); err != nil {
				t.Fatalf("node %s: %v", n.Addr, err)
			}
			got[n.Index] += min(k, 1)
		}
	}
	return got
}

// waitStatus waits until node i's `nodetool status` shows addr in state ("UN", "DN").
func waitStatus(ctx context.Context, t *testing.T, c *launcher.Cluster, i int, addr, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, convictWithin)
	defer cancel()
	start := time.Now()
	for {
		out, err := c.Nodetool(ctx, i, "status")
		if err == nil {
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == state && f[1] == addr {
					t.Logf("node %d sees %s %s after %s", i+1, addr, state, time.Since(start).Round(100*time.Millisecond))
					return
				}
			}
		}
		if err := serverproc.Sleep(ctx, time.Second); err != nil {
			t.Fatalf("node %d does not see %s %s within %s: %v", i+1, addr, state, convictWithin, err)
		}
	}
}

// storageConns is what `ss -tnp` shows of the TCP connections on addr's storage port.
func storageConns(ctx context.Context, addr string) string {
	out, err := exec.CommandContext(ctx, "ss", "-tnp").Output()
	if err != nil {
		return "ss: " + err.Error()
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, fmt.Sprintf("%s:%d", addr, launcher.StoragePort)) {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return fmt.Sprintf("%d connections on %s:%d\n  %s", len(lines), addr, launcher.StoragePort, strings.Join(lines, "\n  "))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// apiClient calls one shop's HTTP API, as one browser at a time.
type apiClient struct {
	base string
	http *http.Client
}

func (a apiClient) do(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	status, _, b, err := a.doHeader(ctx, method, path, token, body)
	return status, b, err
}

// doHeader sends one request: a session is written at LOCAL_QUORUM and a read at LOCAL_ONE
// that misses it reads again at LOCAL_QUORUM, so a token works on its first use and a 401 is
// an answer, never retried.
func (a apiClient) doHeader(ctx context.Context, method, path, token string, body any) (int, http.Header, []byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func (a apiClient) startSession(ctx context.Context) (string, error) {
	status, body, err := a.do(ctx, http.MethodPost, "/v1/sessions", "", nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusCreated {
		return "", fmt.Errorf("POST /v1/sessions: %d %s", status, body)
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Token == "" {
		return "", fmt.Errorf("POST /v1/sessions: %s: %v", body, err)
	}
	return v.Token, nil
}

// wantQuorumRefused asserts a 503 problem naming the level and the replicas reachable.
func wantQuorumRefused(t *testing.T, what string, status int, hdr http.Header, body []byte) {
	t.Helper()
	var p httpapi.Problem
	_ = json.Unmarshal(body, &p)
	if status != http.StatusServiceUnavailable || hdr.Get("Content-Type") != "application/problem+json" || hdr.Get("Retry-After") == "" ||
		!strings.Contains(p.Detail, "needs") || !strings.Contains(p.Detail, "reachable") {
		t.Fatalf("%s: %d %s Retry-After %q %s; want 503 problem+json naming the level and the replicas reachable",
			what, status, hdr.Get("Content-Type"), hdr.Get("Retry-After"), body)
	}
	t.Logf("%s: %d, %s", what, status, p.Detail)
}

func (a apiClient) putItem(ctx context.Context, token, product string) (int, http.Header, []byte) {
	status, hdr, body, err := a.doHeader(ctx, http.MethodPut, "/v1/cart/items/"+product, token, map[string]int64{"quantity": 1})
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	return status, hdr, body
}
