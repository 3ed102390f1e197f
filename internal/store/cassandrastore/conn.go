package cassandrastore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/cqltls"
)

// Connection is how a client reaches a production cluster, shared by every command that opens a
// session: the login, the TLS settings and the local data centre. The zero value is the local
// test cluster: no login, plain text, every DC.
type Connection struct {
	// Datacenter, if set, keeps coordinators in that DC (DC-aware, token-aware routing; the
	// driver does not even connect to other DCs' nodes) and turns the consistency levels into
	// their LOCAL_ forms (LevelsFor).
	Datacenter string
	// QuorumEveryDC keeps QUORUM, SERIAL and ONE with a local DC: coordinators stay local but
	// every quorum spans the DCs, so no DC serves writes while cut off from the others.
	QuorumEveryDC bool
	Username      string // PasswordAuthenticator login; empty: none
	Password      string
	TLS           TLSFiles
}

// TLSFiles are PEM files; TLS is on when CAFile is set.
type TLSFiles = cqltls.Files

// Apply sets the login and TLS on a driver configuration (the store and every raw session).
func (cn Connection) Apply(c *gocql.ClusterConfig) error {
	return cqltls.Apply(c, cn.Username, cn.Password, cn.TLS)
}

// Levels are the consistency levels of one client, per family (CAS-1). One place decides them:
// every statement of the store, and the migration's data statements, take their level from here.
type Levels struct {
	Carts, History, Catalog gocql.Consistency // read what was acknowledged: a quorum
	Sessions, Events        gocql.Consistency // availability first: one replica
	// SessionWrites is the level a session is created, bound and revoked at: a quorum, so that a
	// read at Sessions that misses a token is settled by a re-read at this level (read-your-writes
	// across processes: W + R > RF), while a read that finds it stays at one replica.
	SessionWrites gocql.Consistency
	Serial        gocql.Consistency // lightweight transactions
}

// cas1 is the one table of levels, for a client without a local DC: carts and order history at
// QUORUM so a read sees every acknowledged write and read repair runs on a mismatch; the
// catalog read model at QUORUM too (it relies on read repair, which needs a read of more than
// one replica); sessions read and events at ONE (a lost click is acceptable); sessions written
// at QUORUM, so a token is accepted on the next request by any process (a read at ONE that
// misses it reads again at QUORUM); lightweight transactions at SERIAL.
var cas1 = Levels{Carts: gocql.Quorum, History: gocql.Quorum, Catalog: gocql.Quorum,
	Sessions: gocql.One, SessionWrites: gocql.Quorum, Events: gocql.One, Serial: gocql.Serial}

// LevelsFor are the levels of a client in localDC: with a local DC every level of cas1 takes
// its LOCAL_ form, so a cut between DCs leaves each DC serving its own users (a quorum over
// every DC is unreachable from a DC holding half the replicas); without one, cas1.
func LevelsFor(localDC string) Levels {
	l := cas1
	if localDC == "" {
		return l
	}
	for _, c := range []*gocql.Consistency{&l.Carts, &l.History, &l.Catalog, &l.Sessions, &l.SessionWrites, &l.Events, &l.Serial} {
		*c = localForm(*c)
	}
	return l
}

// localForm is the level restricted to the client's DC.
func localForm(c gocql.Consistency) gocql.Consistency {
	switch c {
	case gocql.Quorum:
		return gocql.LocalQuorum
	case gocql.One:
		return gocql.LocalOne
	case gocql.Serial:
		return gocql.LocalSerial
	}
	return c
}

// Levels are the connection's levels: its local DC's (LevelsFor), or cas1's with QuorumEveryDC.
func (cn Connection) Levels() Levels {
	if cn.QuorumEveryDC {
		return LevelsFor("")
	}
	return LevelsFor(cn.Datacenter)
}

// quorum is the level of a statement that must see every acknowledged write of the client's
// quorum families.
func (l Levels) quorum() gocql.Consistency { return l.Carts }

// one is the level of a statement any single replica may answer.
func (l Levels) one() gocql.Consistency { return l.Sessions }

// connectError turns what the driver reports when a session cannot open into one line naming
// the cause: a login refused, a certificate not trusted, or no node reachable.
func connectError(cfg Config, keyspace string, err error) error {
	hosts := strings.Join(cfg.Hosts, ",")
	msg := err.Error()
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case strings.Contains(msg, "Provided username") || strings.Contains(msg, "password are incorrect") || isCode(err, gocql.ErrCodeCredentials):
		return fmt.Errorf("%w: cassandra at %s refused the login of user %q: wrong user name or password (--cassandra-user, SHARDMART_CASSANDRA_PASSWORD or --cassandra-password-file)",
			ErrLogin, hosts, cfg.Username)
	case strings.Contains(msg, "authentication required"):
		return fmt.Errorf("%w: cassandra at %s requires a login: set --cassandra-user and its password", ErrLogin, hosts)
	case errors.As(err, &unknownAuthority) || strings.Contains(msg, "certificate signed by unknown authority"):
		return fmt.Errorf("%w: cassandra at %s: the server's certificate is not signed by the CA in %s (--cassandra-tls-ca)", ErrTLS, hosts, cfg.TLS.CAFile)
	case errors.As(err, &hostname) || strings.Contains(msg, "certificate is valid for") || strings.Contains(msg, "doesn't contain any IP SANs"):
		return fmt.Errorf("%w: cassandra at %s: the server's certificate does not name the address dialled (%s); fix the certificate or set --cassandra-tls-skip-host-verification", ErrTLS, hosts, firstCause(msg))
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: cassandra at %s: the server's certificate is invalid: %s", ErrTLS, hosts, firstCause(msg))
	case cfg.TLS.Enabled() && (strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate")) && cfg.TLS.CertFile == "":
		return fmt.Errorf("%w: cassandra at %s requires a client certificate: set --cassandra-tls-cert and --cassandra-tls-key (%s)", ErrTLS, hosts, firstCause(msg))
	case cfg.TLS.Enabled() && (strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate")):
		return fmt.Errorf("%w: cassandra at %s refused the client certificate %s: is it signed by a CA the nodes trust? (%s)", ErrTLS, hosts, cfg.TLS.CertFile, firstCause(msg))
	case cfg.TLS.Enabled() && (strings.Contains(msg, "first record does not look like a TLS handshake") || strings.Contains(msg, "tls:")):
		return fmt.Errorf("%w: cassandra at %s: TLS handshake failed (does the cluster have client encryption on?): %s", ErrTLS, hosts, firstCause(msg))
	case !cfg.TLS.Enabled() && closedAtFirstFrame(msg):
		return fmt.Errorf("%w: cassandra at %s closed the connection at the handshake: does it require TLS (--cassandra-tls-ca)? (%s)", ErrTLS, hosts, firstCause(msg))
	}
	// The driver reports a missing keyspace only as "no connections were made".
	return fmt.Errorf("cassandra: connect to %s, keyspace %s (if it does not exist, run `shardmart cassandra schema apply --keyspace %s`): %w",
		hosts, keyspace, keyspace, cause{msg: firstCause(msg), err: err})
}

// closedAtFirstFrame tells a node that hung up on the very first frame, the protocol version
// probe, as a TLS-only node does with a plain-text client; a connection lost later (a node
// stopping, a network reset) is not a sign of TLS.
func closedAtFirstFrame(msg string) bool {
	i := strings.Index(msg, "unable to discover protocol version: ")
	if i < 0 {
		return false
	}
	rest := msg[i:]
	return strings.Contains(rest, "EOF") || strings.Contains(rest, "connection reset")
}

// cause keeps the one-line text of a driver error while errors.Is and errors.As still reach it.
type cause struct {
	msg string
	err error
}

func (c cause) Error() string { return c.msg }
func (c cause) Unwrap() error { return c.err }

// ErrLogin and ErrTLS classify a refused connection.
var (
	ErrLogin = errors.New("cassandra login refused")
	ErrTLS   = errors.New("cassandra TLS")
)

// permissionError names the missing permission when the server refuses a statement.
func permissionError(cfg Config, what string, err error) error {
	var ua *gocql.RequestErrUnauthorized
	if errors.As(err, &ua) {
		return fmt.Errorf("%w: cassandra user %q may not %s: %s (GRANT it, see docs/production.md)", ErrPermission, cfg.Username, what, ua.Message())
	}
	return nil
}

// ErrPermission: the login worked but a grant is missing.
var ErrPermission = errors.New("cassandra permission missing")

func isCode(err error, code int) bool {
	var re gocql.RequestError
	return errors.As(err, &re) && re.Code() == code
}

// firstCause is the innermost part of a chain of "a: b: c" messages, where the driver puts the
// reason.
func firstCause(msg string) string {
	if i := strings.LastIndex(msg, "x509: "); i >= 0 {
		return msg[i:]
	}
	if i := strings.LastIndex(msg, "tls: "); i >= 0 {
		return msg[i:]
	}
	return msg
}

// unknownDatacenter opens a session on every DC to tell whether cfg's local DC exists; nil when
// it does or when that cannot be told.
func unknownDatacenter(cfg Config) error {
	all := cfg
	all.Datacenter = ""
	cc, _, err := clusterConfig(all)
	if err != nil {
		return nil
	}
	cc.Keyspace = ""
	cc.Logger = gocql.NewLogger(gocql.LogLevelNone)
	s, err := cc.CreateSession()
	if err != nil {
		return nil
	}
	defer s.Close()
	return checkDatacenter(s, cfg.Datacenter)
}

// checkDatacenter fails when no node of the cluster is in the local DC, naming the DCs there
// are.
func checkDatacenter(s *gocql.Session, local string) error {
	if local == "" {
		return nil
	}
	var dcs []string
	for _, h := range s.GetHosts() {
		if dc := h.DataCenter(); dc != "" && !slices.Contains(dcs, dc) {
			dcs = append(dcs, dc)
		}
	}
	if slices.Contains(dcs, local) {
		return nil
	}
	slices.Sort(dcs)
	return fmt.Errorf("cassandra: local data centre %q is unknown to the cluster (it has %s): fix --cassandra-local-dc", local, strings.Join(dcs, ", "))
}

// quietLogger drops the driver's connection warnings until the session is open: a refused
// login or an untrusted certificate is reported once, by Open, not once per host and retry.
type quietLogger struct {
	gocql.StructuredLogger
	open *atomic.Bool
}

func (l quietLogger) Error(msg string, f ...gocql.LogField) {
	if l.open.Load() {
		l.StructuredLogger.Error(msg, f...)
	}
}

func (l quietLogger) Warning(msg string, f ...gocql.LogField) {
	if l.open.Load() {
		l.StructuredLogger.Warning(msg, f...)
	}
}

// createSession opens the session with the driver's warnings held back until it is open.
func createSession(cc *gocql.ClusterConfig) (*gocql.Session, error) {
	open := new(atomic.Bool)
	cc.Logger = quietLogger{StructuredLogger: cc.Logger, open: open}
	s, err := cc.CreateSession()
	open.Store(err == nil)
	return s, err
}

// OpenSession opens a raw session on cfg's connection (keyspace cfg.Keyspace; none when it is
// "-"), with the same one-line errors as Open and the local DC checked: for the commands that run
// their own statements (schema apply, monitors, benchmarks).
func OpenSession(ctx context.Context, cfg Config) (*gocql.Session, error) {
	cc, _, err := clusterConfig(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Keyspace == "-" {
		cc.Keyspace = ""
	}
	return openChecked(ctx, cfg, cc)
}

func openChecked(_ context.Context, cfg Config, cc *gocql.ClusterConfig) (*gocql.Session, error) {
	s, err := createSession(cc)
	if err != nil {
		cerr := connectError(cfg, cc.Keyspace, err)
		if cfg.Datacenter != "" && !errors.Is(cerr, ErrLogin) && !errors.Is(cerr, ErrTLS) {
			// With a local DC the driver connects to that DC's nodes only, so an unknown DC
			// looks like no node at all: ask the contact points which DCs there are.
			if dcErr := unknownDatacenter(cfg); dcErr != nil {
				return nil, dcErr
			}
		}
		return nil, cerr
	}
	if err := checkDatacenter(s, cfg.Datacenter); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
