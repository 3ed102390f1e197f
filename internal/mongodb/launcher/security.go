package launcher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/mongodb/access"
)

// Security turns on access control and TLS. The zero value is neither: the development
// default.
type Security struct {
	// Auth starts every member with a keyFile: members authenticate to each other with it and
	// every client must log in. Up creates AdminUser through the localhost exception (the
	// one unauthenticated createUser a mongod with no users accepts from 127.0.0.1).
	Auth          bool
	AdminUser     string // default "admin"; created in admin with the root role
	AdminPassword string // required with Auth when the set is new
	KeyFile       string // the user's own keyFile; empty: the launcher writes one (Keys)
	// TLS starts every member with --tlsMode requireTLS: a plain connection is refused.
	// Clients authenticate with a password, not a certificate
	// (--tlsAllowConnectionsWithoutCertificates): TLS then authenticates the server only, any
	// host reaching the port can try a login, and a certificate a client does present must
	// chain to the CA. Members authenticate to each other with the keyFile, not x.509.
	TLS         bool
	CAFile      string // the user's own CA (PEM); empty: the launcher makes one (Keys)
	CertKeyFile string // the members' certificate and key (PEM), signed by CAFile
}

// Keys are the files the launcher makes for Security when the user gives none of their own.
type Keys struct {
	KeyFile     string // keyfile: 756 random bytes, base64, mode 0400
	CAFile      string // tls/ca.pem: a self-signed ECDSA P-256 CA
	CertKeyFile string // tls/server.pem: a member certificate for 127.0.0.1, localhost and addr, with its key
}

// KeysIn are the paths of the files the launcher makes under dir.
func KeysIn(dir string) Keys {
	return Keys{
		KeyFile:     filepath.Join(dir, "keyfile"),
		CAFile:      filepath.Join(dir, "tls", "ca.pem"),
		CertKeyFile: filepath.Join(dir, "tls", "server.pem"),
	}
}

// fill puts the launcher's own key paths under dir in place of the ones the user left empty,
// and reports which files the launcher must make.
func (sec *Security) fill(dir string) (todo Keys) {
	if sec.Auth && sec.AdminUser == "" {
		sec.AdminUser = "admin"
	}
	// mongod runs in its member directory and clients anywhere: every path absolute.
	for _, p := range []*string{&dir, &sec.KeyFile, &sec.CAFile, &sec.CertKeyFile} {
		if *p != "" {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	k := KeysIn(dir)
	if sec.Auth && sec.KeyFile == "" {
		sec.KeyFile, todo.KeyFile = k.KeyFile, k.KeyFile
	}
	if sec.TLS && sec.CAFile == "" {
		sec.CAFile, todo.CAFile = k.CAFile, k.CAFile
		sec.CertKeyFile, todo.CertKeyFile = k.CertKeyFile, k.CertKeyFile
	}
	return todo
}

func (sec Security) validate() error {
	if sec.TLS && (sec.CAFile == "") != (sec.CertKeyFile == "") {
		return errors.New("launcher: TLS needs both a CA file and a certificate-key file, or neither (the launcher makes both)")
	}
	return nil
}

// args are the mongod options of sec.
func (sec Security) args() []string {
	var a []string
	if sec.Auth {
		a = append(a, "--keyFile", sec.KeyFile) // implies --auth
	}
	if sec.TLS {
		a = append(a, "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", sec.CertKeyFile,
			"--tlsCAFile", sec.CAFile, "--tlsAllowConnectionsWithoutCertificates")
	}
	return a
}

// uriOptions are the connection-string options a client needs for sec (no credentials).
func (sec Security) uriOptions() string {
	if !sec.TLS {
		return ""
	}
	return "tls=true&tlsCAFile=" + escapePath(sec.CAFile)
}

// escapePath escapes what the driver's query-string parsing would misread in a path ("+" is a
// space to it), and keeps "/" readable, unlike url.QueryEscape.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "?", "%3F", "#", "%23", " ", "%20", "+", "%2B").Replace(p)
}

// make writes the files in k that do not exist yet; existing ones are kept, so a set restarts
// with the keys it was created with.
func (k Keys) make(addr string) error {
	if k.KeyFile != "" {
		if err := makeKeyFile(k.KeyFile); err != nil {
			return err
		}
	}
	if k.CAFile != "" {
		if err := makeCerts(k.CAFile, k.CertKeyFile, addr); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// makeKeyFile writes a keyFile: base64 characters only, at most 1024 of them, and no access
// for group or others, or mongod refuses it.
func makeKeyFile(path string) error {
	err := MakeSecretFile(path, 0o400, 756, func(b []byte) string { return base64.StdEncoding.EncodeToString(b)[:1008] })
	if err != nil {
		return fmt.Errorf("launcher: keyfile: %w", err)
	}
	return nil
}

// makeCerts writes a CA and a member certificate signed by it. The member certificate serves
// clients and is also presented by a member when it connects to another (no separate cluster
// certificate), so it carries both serverAuth and clientAuth.
func makeCerts(caPath, certPath, addr string) error {
	if exists(caPath) && exists(certPath) {
		return nil
	}
	fail := func(err error) error { return fmt.Errorf("launcher: TLS certificates: %w", err) }
	if err := os.MkdirAll(filepath.Dir(caPath), 0o700); err != nil {
		return fail(err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{Organization: []string{"shardmart"}, CommonName: "shardmart local CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fail(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	if ip := net.ParseIP(addr); ip != nil && !ip.Equal(ips[0]) {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{Organization: []string{"shardmart"}, CommonName: "shardmart mongod"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(2, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fail(err)
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(certPath, append(pemCert, pemKey...), 0o600); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return fail(err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// tlsConfig trusts sec's CA.
func (sec Security) tlsConfig() (*tls.Config, error) {
	b, err := os.ReadFile(sec.CAFile)
	if err != nil {
		return nil, fmt.Errorf("launcher: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("launcher: CA file %s holds no PEM certificate", sec.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// internalCredential is the identity members use among themselves, derived from the keyFile:
// the launcher's harness sends the internal commands a mongos would (add a shard, …), so it
// authenticates as a mongos does.
func (sec Security) internalCredential() (options.Credential, error) {
	b, err := os.ReadFile(sec.KeyFile)
	if err != nil {
		return options.Credential{}, fmt.Errorf("launcher: keyfile: %w", err)
	}
	// mongod ignores whitespace in a keyFile.
	key := strings.Join(strings.Fields(string(b)), "")
	return options.Credential{Username: "__system", Password: key, AuthSource: "local", AuthMechanism: "SCRAM-SHA-256"}, nil
}

// clientOptions connects to uri with sec's TLS settings and, when internal, as a member does;
// otherwise with no login (hello, and the localhost exception).
func (sec Security) clientOptions(uri string, internal bool) (*options.ClientOptions, error) {
	o := options.Client().ApplyURI(uri)
	if sec.TLS {
		cfg, err := sec.tlsConfig()
		if err != nil {
			return nil, err
		}
		o.SetTLSConfig(cfg)
	}
	if internal && sec.Auth {
		cred, err := sec.internalCredential()
		if err != nil {
			return nil, err
		}
		o.SetAuth(cred)
	}
	return o, nil
}

// ClientOptions connect to uri (one of this set's URIs) as the launcher's harness: over TLS
// when the set has it, and, with Auth, authenticated by the keyFile as a member or a mongos
// is, with every privilege (tests only: applications log in as their own users).
func (s *Set) ClientOptions(uri string) (*options.ClientOptions, error) {
	return s.opts.Security.clientOptions(uri, true)
}

// Security is the set's access control and TLS (the admin password only when given to New
// or SetAdminPassword).
func (s *Set) Security() Security { return s.opts.Security }

// SetAdminPassword gives a set from Open (set.json keeps no password) the admin password, for
// CreateUser. Call it before using the set from several goroutines.
func (s *Set) SetAdminPassword(pw string) { s.opts.Security.AdminPassword = pw }

// SetAdminPassword is Set.SetAdminPassword for every set of the cluster.
func (c *Cluster) SetAdminPassword(pw string) {
	for _, s := range c.sets() {
		s.SetAdminPassword(pw)
	}
}

// User is a login to create in a set.
type User struct {
	Name     string
	Password string
	Grants   []Grant
	// In are the sets of a cluster that need the user (zero: every set); a replica set
	// ignores it.
	In ClusterSets
}

// ClusterSets are sets of a cluster by role.
type ClusterSets int

const (
	ConfigServer ClusterSets = 1 << iota // where a mongos keeps its users: clients of the cluster log in there
	ShardSets                            // each shard, for the monitors that log in to shards directly
)

// Grant is a built-in role on a database; admin for cluster-wide roles such as clusterMonitor.
type Grant struct {
	Role string
	DB   string
}

// CreateUser creates u in the admin database of the set's primary, logged in as the admin
// user (Security.AdminUser and AdminPassword). An existing user of that name is updated to
// u's password and grants, so tests and `mongo users` can run again.
func (s *Set) CreateUser(ctx context.Context, u User) error {
	sec := s.opts.Security
	if !sec.Auth || sec.AdminPassword == "" {
		return fmt.Errorf("set %s: creating users needs a set started with Auth and the admin password", s.opts.Name)
	}
	roles := bson.A{}
	for _, g := range u.Grants {
		roles = append(roles, bson.D{{Key: "role", Value: g.Role}, {Key: "db", Value: g.DB}})
	}
	o, err := sec.clientOptions(s.URI(), false)
	if err != nil {
		return err
	}
	o.SetAuth(options.Credential{Username: sec.AdminUser, Password: sec.AdminPassword, AuthSource: "admin"}).
		SetServerSelectionTimeout(30 * time.Second)
	c, err := mongo.Connect(o)
	if err != nil {
		return fmt.Errorf("set %s: %w", s.opts.Name, err)
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	admin := c.Database("admin")
	wc := bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}
	err = admin.RunCommand(ctx, bson.D{{Key: "createUser", Value: u.Name}, {Key: "pwd", Value: u.Password},
		{Key: "roles", Value: roles}, wc}).Err()
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 51003 { // DuplicateKey: the user exists
		err = admin.RunCommand(ctx, bson.D{{Key: "updateUser", Value: u.Name}, {Key: "pwd", Value: u.Password},
			{Key: "roles", Value: roles}, wc}).Err()
	}
	if err != nil {
		return fmt.Errorf("set %s: create user %s: %w", s.opts.Name, u.Name, access.Explain(err))
	}
	return nil
}

// createAdmin creates the admin user on the primary through the localhost exception, unless
// users exist already (a restart): then the exception is closed and createUser answers
// Unauthorized, and the admin password is checked by logging in.
func (s *Set) createAdmin(ctx context.Context) error {
	sec := s.opts.Security
	if !sec.Auth {
		return nil
	}
	p, err := s.WaitPrimary(ctx)
	if err != nil {
		return err
	}
	err = s.withMemberAs(ctx, p, false, func(c *mongo.Client) error {
		if sec.AdminPassword == "" {
			// Without a password (a set from Open) only a set that has its users may start:
			// usersInfo is refused then, and answered through the open exception otherwise.
			if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "usersInfo", Value: 1}}).Err(); err != nil {
				return err
			}
			return fmt.Errorf("set %s: no admin password to create user %s with", s.opts.Name, sec.AdminUser)
		}
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: sec.AdminUser},
			{Key: "pwd", Value: sec.AdminPassword}, {Key: "roles", Value: bson.A{"root"}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}).Err()
	})
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == 13 && sec.AdminPassword != "" { // Unauthorized: users exist
		err = s.withMemberAs(ctx, p, false, func(c *mongo.Client) error {
			return c.Database("admin").RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}}).Err()
		}, options.Credential{Username: sec.AdminUser, Password: sec.AdminPassword, AuthSource: "admin"})
		if err != nil {
			return fmt.Errorf("set %s: log in as admin user %s: %w", s.opts.Name, sec.AdminUser, access.Explain(err))
		}
		return nil
	}
	if errors.As(err, &ce) && (ce.Code == 13 || ce.Code == 51003) { // DuplicateKey: this one exists
		return nil
	}
	if err != nil {
		return fmt.Errorf("set %s: create admin user %s: %w", s.opts.Name, sec.AdminUser, err)
	}
	s.opts.Logger.Debug("admin user created", "set", s.opts.Name, "user", sec.AdminUser)
	return nil
}
