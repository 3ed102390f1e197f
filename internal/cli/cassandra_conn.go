package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// passwordEnv holds the Cassandra password; --cassandra-password-file is the other way. There
// is no password flag: a command line is visible to every user of the host (ps).
const passwordEnv = "SHARDMART_CASSANDRA_PASSWORD"

// cassandraConnFlags are how every command that talks CQL logs in to a production cluster:
// serve, seed, migrate, monitor, bench and `cassandra schema apply` register the same set.
type cassandraConnFlags struct {
	localDC      string
	user         string
	passwordFile string
	tls          cassandrastore.TLSFiles
	everyDC      bool
}

func (c *cassandraConnFlags) register(f *pflag.FlagSet) {
	f.StringVar(&c.localDC, "cassandra-local-dc", "", "the client's own Cassandra data centre: coordinators there only, consistency LOCAL_QUORUM/LOCAL_SERIAL/LOCAL_ONE instead of QUORUM/SERIAL/ONE")
	f.StringVar(&c.user, "cassandra-user", "", "Cassandra login (PasswordAuthenticator); the password from "+passwordEnv+" or --cassandra-password-file")
	f.StringVar(&c.passwordFile, "cassandra-password-file", "", "file holding the Cassandra password (trailing newline ignored); "+passwordEnv+" otherwise")
	f.StringVar(&c.tls.CAFile, "cassandra-tls-ca", "", "PEM CA that signed the nodes' certificates: turns client TLS on")
	f.StringVar(&c.tls.CertFile, "cassandra-tls-cert", "", "PEM client certificate, for clusters that require one (mTLS)")
	f.StringVar(&c.tls.KeyFile, "cassandra-tls-key", "", "PEM key of --cassandra-tls-cert")
	f.BoolVar(&c.tls.SkipHostVerification, "cassandra-tls-skip-host-verification", false, "accept a node certificate signed by the CA that does not name the node's address")
	f.BoolVar(&c.everyDC, "cassandra-quorum-every-dc", false, "with --cassandra-local-dc: keep QUORUM/SERIAL/ONE (quorums over every DC; writes stop in a DC cut off from the others)")
	fromEnv(f, "cassandra-local-dc", "SHARDMART_CASSANDRA_LOCAL_DC")
	fromEnv(f, "cassandra-user", "SHARDMART_CASSANDRA_USER")
	fromEnv(f, "cassandra-password-file", "SHARDMART_CASSANDRA_PASSWORD_FILE")
	fromEnv(f, "cassandra-tls-ca", "SHARDMART_CASSANDRA_TLS_CA")
	fromEnv(f, "cassandra-tls-cert", "SHARDMART_CASSANDRA_TLS_CERT")
	fromEnv(f, "cassandra-tls-key", "SHARDMART_CASSANDRA_TLS_KEY")
}

// connection resolves the flags, reading the password from its file or the environment.
func (c cassandraConnFlags) connection() (cassandrastore.Connection, error) {
	cn := cassandrastore.Connection{Datacenter: c.localDC, QuorumEveryDC: c.everyDC, Username: c.user, TLS: c.tls}
	for _, f := range c.exposedFiles() {
		slog.Warn("a Cassandra secret is readable by other users of the host: chmod 600 it", "file", f)
	}
	switch {
	case c.passwordFile != "":
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return cn, fmt.Errorf("--cassandra-password-file: %w", err)
		}
		cn.Password = strings.TrimRight(string(b), "\r\n")
	default:
		cn.Password = os.Getenv(passwordEnv)
	}
	if cn.Username != "" && cn.Password == "" {
		return cn, fmt.Errorf("--cassandra-user %s: no password (set %s or --cassandra-password-file)", cn.Username, passwordEnv)
	}
	return cn, nil
}

// exposedFiles are the password and client key files that the file's group or every user may
// read.
func (c cassandraConnFlags) exposedFiles() []string {
	var out []string
	for _, f := range []string{c.passwordFile, c.tls.KeyFile} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.Mode().Perm()&0o077 != 0 {
			out = append(out, f)
		}
	}
	return out
}
