package cassandrastore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	storepkg "github.com/shardmart/shardmart/internal/store"
)

func TestLevelsForLocalDC(t *testing.T) {
	global := LevelsFor("")
	if global.Carts != gocql.Quorum || global.History != gocql.Quorum || global.Catalog != gocql.Quorum ||
		global.Sessions != gocql.One || global.Events != gocql.One || global.Serial != gocql.Serial {
		t.Errorf("without a local DC: %+v, want CAS-1's QUORUM/ONE/SERIAL", global)
	}
	local := LevelsFor("dc1")
	if local.Carts != gocql.LocalQuorum || local.History != gocql.LocalQuorum || local.Catalog != gocql.LocalQuorum ||
		local.Sessions != gocql.LocalOne || local.Events != gocql.LocalOne || local.Serial != gocql.LocalSerial {
		t.Errorf("with a local DC: %+v, want LOCAL_QUORUM/LOCAL_ONE/LOCAL_SERIAL", local)
	}
	// The driver's session defaults follow the same decision.
	cc, p, err := clusterConfig(Config{Hosts: []string{"127.0.0.1"}, Connection: Connection{Datacenter: "dc1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Consistency != gocql.LocalQuorum || cc.SerialConsistency != gocql.LocalSerial || p.levels() != local || cc.HostFilter == nil {
		t.Errorf("cluster config with dc1: %s/%s, policy %+v, host filter %v", cc.Consistency, cc.SerialConsistency, p.levels(), cc.HostFilter)
	}
	cc, p, err = clusterConfig(Config{Hosts: []string{"127.0.0.1"}, Connection: Connection{Datacenter: "dc1", QuorumEveryDC: true}})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Consistency != gocql.Quorum || p.levels() != global {
		t.Errorf("quorum over every DC: %s, policy %+v", cc.Consistency, p.levels())
	}
	if (*policy)(nil).levels() != global {
		t.Error("a nil policy (NewStore) does not use CAS-1's levels")
	}
}

func TestParseReplication(t *testing.T) {
	got, err := ParseReplication(" dc1:3, dc2:1 ")
	if err != nil || len(got) != 2 || got["dc1"] != 3 || got["dc2"] != 1 {
		t.Fatalf("ParseReplication = %v, %v", got, err)
	}
	if cql := replicationCQL(got); cql != "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 1}" {
		t.Errorf("replicationCQL = %s", cql)
	}
	if !sameReplication(map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "1"}, got) {
		t.Error("the same replication reads as different")
	}
	if sameReplication(map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3"}, got) {
		t.Error("a missing DC reads as the same")
	}
	for _, bad := range []string{"", "dc1", "dc1:0", "dc1:10", "dc1:x", ":3", "dc1:3,dc1:2"} {
		if _, err := ParseReplication(bad); err == nil {
			t.Errorf("ParseReplication(%q) accepted", bad)
		}
	}
}

func TestUnavailableNamesLevelAndReplicas(t *testing.T) {
	un := &gocql.RequestErrUnavailable{Consistency: gocql.Quorum, Required: 3, Alive: 1}
	err := Unavailable(un)
	var ue *storepkg.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, storepkg.ErrUnavailable) || ue.Reason != "QUORUM needs 3 replicas, 1 reachable" {
		t.Errorf("Unavailable(%v) = %v", un, err)
	}
	if !errors.As(err, new(*gocql.RequestErrUnavailable)) {
		t.Error("the driver's error is no longer reachable")
	}
	other := errors.New("syntax error")
	if Unavailable(other) != other || Unavailable(nil) != nil {
		t.Error("other errors are changed")
	}
}

func TestTLSFilesRefuseIncompleteSettings(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    TLSFiles
		says string
	}{
		{TLSFiles{CertFile: "c.pem", KeyFile: "k.pem"}, "needs the CA file"},
		{TLSFiles{CAFile: filepath.Join(dir, "missing.pem")}, "CA file"},
		{TLSFiles{CAFile: ca}, "holds no PEM certificate"},
	} {
		if _, err := tc.f.Config(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.says)
		}
	}
	if c, err := (TLSFiles{}).Config(); c != nil || err != nil {
		t.Errorf("no files: %v, %v; want TLS off", c, err)
	}
	if err := (Connection{Password: "x"}).Apply(gocql.NewCluster("127.0.0.1")); err == nil {
		t.Error("a password without a user accepted")
	}
}

func TestConnectErrorClaimsTLSOnlyAtFirstFrame(t *testing.T) {
	cfg := Config{Hosts: []string{"127.0.0.1"}}
	first := errors.New("gocql: unable to create session: unable to discover protocol version: EOF")
	if err := connectError(cfg, "ks", first); !errors.Is(err, ErrTLS) {
		t.Errorf("a node that hangs up on the first frame: %v, want ErrTLS", err)
	}
	for _, later := range []error{
		errors.New("gocql: unable to create session: unable to connect to initial hosts: EOF"),
		errors.New("gocql: unable to create session: control: unable to connect to initial hosts: read tcp 127.0.0.1:9042: connection reset by peer"),
	} {
		if err := connectError(cfg, "ks", later); errors.Is(err, ErrTLS) || strings.Contains(err.Error(), "require TLS") {
			t.Errorf("a connection lost after the handshake: %v, want no TLS claim", err)
		}
	}
}

func TestConnectErrorKeepsDriverError(t *testing.T) {
	driver := fmt.Errorf("gocql: %w", gocql.ErrNoConnections)
	err := connectError(Config{Hosts: []string{"127.0.0.1"}}, "ks", driver)
	if !errors.Is(err, gocql.ErrNoConnections) {
		t.Errorf("%v: errors.Is(ErrNoConnections) is false", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.HasSuffix(err.Error(), driver.Error()) {
		t.Errorf("%q: not one line ending with the driver's reason", err)
	}
}

func TestSchemaBehindWithoutError(t *testing.T) {
	if err := schemaBehind(LatestVersion()); err != nil {
		t.Errorf("latest version: %v", err)
	}
	err := schemaBehind(0)
	if err == nil || strings.Contains(err.Error(), "%!") {
		t.Errorf("version 0: %v, want a clean line", err)
	}
}
