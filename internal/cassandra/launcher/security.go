package launcher

import (
	"context"
	"fmt"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/cqltls"
)

// SuperUser and SuperPassword are the login a cluster with Auth starts with: Cassandra's own
// default role, for local and test clusters only (a production cluster drops or changes it).
const (
	SuperUser     = "cassandra"
	SuperPassword = "cassandra"
)

// securityYAML is the cassandra.yaml part for Options.Auth and Options.TLS; empty without them.
func securityYAML(c *Cluster) string {
	var b strings.Builder
	if c.opts.Auth {
		b.WriteString(`authenticator:
  class_name: org.apache.cassandra.auth.PasswordAuthenticator
authorizer:
  class_name: org.apache.cassandra.auth.CassandraAuthorizer
role_manager:
  class_name: org.apache.cassandra.auth.CassandraRoleManager
`)
	}
	if c.opts.TLS && c.tls != nil {
		fmt.Fprintf(&b, `client_encryption_options:
  enabled: true
  optional: false
  require_client_auth: %t
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: %s
  truststore: %s
`, c.opts.RequireClientCert, c.tls.Keystore, c.tls.CA)
	}
	return b.String()
}

// TLS is the cluster's TLS files (nil without TLS): a client's CA and, for a generated set, a
// client certificate.
func (c *Cluster) TLS() *TLSFiles {
	if !c.opts.TLS {
		return nil
	}
	if c.tls == nil { // not prepared in this process: the files sit where prepare put them
		if c.opts.UserTLS != nil {
			return c.opts.UserTLS
		}
		f, err := generatedTLS(c.opts.Dir, c.nodes)
		if err != nil {
			return nil
		}
		c.tls = &f
	}
	return c.tls
}

// DCs are the cluster's data centres with their nodes, in order.
func (c *Cluster) DCs() map[string][]Node {
	m := map[string][]Node{}
	for _, n := range c.nodes {
		m[n.DC] = append(m[n.DC], n)
	}
	return m
}

// secure sets the superuser login and TLS on a session of the launcher's own: the cluster's
// CA, the client certificate when there is one, and host verification only for certificates
// the launcher made (a user's may name other hosts).
func (c *Cluster) secure(cfg *gocql.ClusterConfig) error {
	user, password := "", ""
	if c.opts.Auth {
		user, password = SuperUser, SuperPassword
	}
	var files cqltls.Files
	if f := c.TLS(); f != nil {
		files = cqltls.Files{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey, SkipHostVerification: c.opts.UserTLS != nil}
	}
	return cqltls.Apply(cfg, user, password, files)
}

// replicateAuth gives system_auth replicas in every data centre (up to 3 per DC) and repairs
// it once: its default is one replica in one DC, so a DC cut off from it could log nobody in,
// and the default superuser would exist on that one replica only.
func (c *Cluster) replicateAuth(ctx context.Context) error {
	dcs := c.DCs()
	if !c.opts.Auth || len(dcs) < 2 {
		return nil
	}
	want := map[string]string{}
	parts := []string{"'class': 'NetworkTopologyStrategy'"}
	for dc, nodes := range dcs {
		rf := min(len(nodes), 3)
		want[dc] = fmt.Sprint(rf)
		parts = append(parts, fmt.Sprintf("'%s': %d", dc, rf))
	}
	var cur map[string]string
	err := c.onLiveNode(ctx, func(s *gocql.Session) error {
		if err := s.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'system_auth'`).WithContext(ctx).Scan(&cur); err != nil {
			return err
		}
		for dc, rf := range want {
			if cur[dc] != rf {
				return s.Query(`ALTER KEYSPACE system_auth WITH replication = {` + strings.Join(parts, ", ") + `}`).WithContext(ctx).Exec()
			}
		}
		cur = nil // nothing changed
		return nil
	})
	if err != nil {
		return fmt.Errorf("replicate system_auth to every data centre: %w", err)
	}
	if cur == nil {
		return nil
	}
	for _, n := range c.nodes {
		if _, err := c.Nodetool(ctx, n.Index, "repair", "-full", "system_auth"); err != nil {
			return fmt.Errorf("repair system_auth after replicating it: %w", err)
		}
	}
	return nil
}
