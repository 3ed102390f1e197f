package launcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// A node that requires a login and a client certificate: the launcher's own readiness check gets
// through with the certificates it made, a client with them opens the store's session, and a
// client without a certificate, or without a login, is refused in one line saying so.
func TestLoginAndMutualTLSNode(t *testing.T) {
	c := ForTest(t, Options{Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-mtls", Auth: true, TLS: true, RequireClientCert: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := c.TLS()
	if f == nil || f.ClientCert == "" {
		t.Fatalf("TLS files %+v: want a CA and a client certificate", f)
	}
	withCert := cassandrastore.Connection{Username: SuperUser, Password: SuperPassword,
		TLS: cassandrastore.TLSFiles{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}}
	s, err := cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-", Connection: withCert})
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	s.Close()
	noCert := withCert
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	// A node just booted on a loaded machine may not answer the TLS handshake within the
	// connect timeout: that says nothing about the certificate, so the attempt is made again.
	for range 3 {
		_, err = cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-", Connection: noCert})
		if err == nil || !strings.Contains(err.Error(), "no response to connection startup within timeout") {
			break
		}
		t.Logf("without a client certificate, no answer in time (tried again): %v", err)
	}
	if !errors.Is(err, cassandrastore.ErrTLS) || !strings.Contains(err.Error(), "requires a client certificate") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("without a client certificate: %v; want one line saying a client certificate is required", err)
	}
	t.Logf("without a client certificate: %v", err)
	noLogin := withCert
	noLogin.Username, noLogin.Password = "", ""
	_, err = cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-", Connection: noLogin})
	if !errors.Is(err, cassandrastore.ErrLogin) || !strings.Contains(err.Error(), "requires a login") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("without a login: %v; want one line saying a login is required", err)
	}
	t.Logf("without a login: %v", err)
}
