package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Role is what a replica set is in a cluster.
type Role string

const (
	RolePlain  Role = ""          // a plain replica set: the application's database
	RoleShard  Role = "shardsvr"  // a shard of a sharded cluster
	RoleConfig Role = "configsvr" // the config server replica set
)

// Options describe a local replica set. Zero values take the defaults noted.
type Options struct {
	Dir      string // set directory (data, logs, pidfiles, set.json); required
	Name     string // replica set name, default "rs0"
	Members  int    // 1..7, default 1
	Addr     string // listen address, default 127.0.0.1
	BasePort int    // member i listens on BasePort+i, default 27017
	Role     Role
	CacheGB  float64 // WiredTiger cache per member, default 0.25
	OplogMB  int     // default 256
	// ElectionTimeout is the set's electionTimeoutMillis; zero keeps MongoDB's 10 s.
	ElectionTimeout time.Duration
	// NoCatchUp sets catchUpTimeoutMillis to 0: a new primary takes writes at once instead of
	// first waiting a heartbeat round for members that might have newer writes. What catch-up
	// saves from a rollback was never majority-acknowledged, and every shardmart write is.
	NoCatchUp bool
	// ExtraArgs go to every mongod (e.g. --setParameter orphanCleanupDelaySecs=0 for shards).
	ExtraArgs []string
	// Security turns on access control (keyFile, admin user) and TLS; zero: neither.
	Security Security
	// DieWithParent asks the kernel to SIGKILL each mongod when the starting process dies, so a
	// killed `go test` leaves none behind. Off for `shardmart mongo up`, whose set outlives it.
	DieWithParent bool
	CacheDir      string        // binary cache, default DefaultCacheDir()
	BootTimeout   time.Duration // per member and for the election, default 2 minutes
	StopTimeout   time.Duration // SIGTERM grace before SIGKILL, default 30 s
	Logger        *slog.Logger
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("launcher: Options.Dir is required")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	o.Dir = abs
	if o.Name == "" {
		o.Name = "rs0"
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if o.Members < 1 || o.Members > 7 {
		return fmt.Errorf("launcher: %d members: want 1 to 7", o.Members)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1"
	}
	if o.BasePort == 0 {
		o.BasePort = 27017
	}
	if o.CacheGB == 0 {
		o.CacheGB = 0.25
	}
	if o.OplogMB == 0 {
		o.OplogMB = 256
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 2 * time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o.Security.validate()
}

// Member is one mongod of a set.
type Member struct {
	Index int
	Host  string // addr:port as in the replica set config
	Dir   string
}

func (m Member) dbPath() string  { return filepath.Join(m.Dir, "db") }
func (m Member) pidFile() string { return filepath.Join(m.Dir, "mongod.pid") }

// LogPath is the member's mongod log (JSON lines).
func (m Member) LogPath() string { return filepath.Join(m.Dir, "mongod.log") }

// Set is a local replica set. Its methods may be called from several goroutines.
type Set struct {
	opts    Options
	members []Member
	bin     string
	keys    Keys // the security files the launcher makes for this set

	mu      sync.Mutex
	procs   map[int]*serverproc.Child // mongods this process started
	logFrom map[int]logOffsets        // where each member's last start began writing its logs
}

// New validates opts and lays out the members; nothing starts.
func New(opts Options) (*Set, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	keys := opts.Security.fill(opts.Dir)
	s := &Set{opts: opts, keys: keys, procs: map[int]*serverproc.Child{}, logFrom: map[int]logOffsets{}}
	for i := range opts.Members {
		s.members = append(s.members, Member{
			Index: i,
			Host:  net.JoinHostPort(opts.Addr, strconv.Itoa(opts.BasePort+i)),
			Dir:   filepath.Join(opts.Dir, "m"+strconv.Itoa(i)),
		})
	}
	return s, nil
}

// ErrNoSet means the directory holds no set written by Up.
var ErrNoSet = errors.New("no replica set in directory (run `shardmart mongo up` first)")

// ErrOtherTopology means a directory holds the data of another replica set or cluster than the
// one asked for: its members would wait forever for peers, ports or a set name that are not
// there, so nothing starts.
var ErrOtherTopology = errors.New("the directory holds another topology's data")

type state struct {
	Name     string  `json:"name"`
	Members  int     `json:"members"`
	Addr     string  `json:"addr"`
	BasePort int     `json:"base_port"`
	Role     Role    `json:"role"`
	CacheGB  float64 `json:"cache_gb"`
	CacheDir string  `json:"cache_dir"`
	// Security without the admin password, so that status and down can reach the set.
	Auth        bool   `json:"auth,omitempty"`
	AdminUser   string `json:"admin_user,omitempty"`
	KeyFile     string `json:"key_file,omitempty"`
	TLS         bool   `json:"tls,omitempty"`
	CAFile      string `json:"tls_ca_file,omitempty"`
	CertKeyFile string `json:"tls_cert_key_file,omitempty"`
}

func stateFile(dir string) string { return filepath.Join(dir, "set.json") }

// sameSet tells whether two states describe the same replica set: the fields its data (the
// replica set config, the shard identity) depends on.
func (st state) sameSet(o state) bool {
	return st.Name == o.Name && st.Members == o.Members && st.Addr == o.Addr && st.BasePort == o.BasePort && st.Role == o.Role
}

// ErrOtherSecurity means a directory holds a set or cluster started with other access control
// or TLS settings than asked: restarting it without them would silently open it to anyone who
// reaches the port, and with other keys would lock its members out of each other.
var ErrOtherSecurity = errors.New("the directory's set was started with other security settings")

// security describes the access control and TLS of st, for an error line.
func (st state) security() string {
	auth, tls := "no auth", "no TLS"
	if st.Auth {
		auth = "--auth (keyFile " + st.KeyFile + ")"
	}
	if st.TLS {
		tls = "--tls (CA " + st.CAFile + ", certificate " + st.CertKeyFile + ")"
	}
	return auth + ", " + tls
}

// sameSecurity tells whether o starts the set with the access control, TLS and key files it was
// created with.
func (st state) sameSecurity(o state) bool {
	return st.Auth == o.Auth && st.KeyFile == o.KeyFile && st.TLS == o.TLS && st.CAFile == o.CAFile && st.CertKeyFile == o.CertKeyFile
}

// checkHeld refuses to start the set in dir as want when dir holds another set, or the same
// set with other security settings; a directory with no set passes.
func checkHeld(dir string, want state) error {
	held, err := readState(dir)
	switch {
	case errors.Is(err, ErrNoSet):
		return nil
	case err != nil:
		return err
	case !held.sameSet(want):
		return fmt.Errorf("%w: %s holds a %s; asked for a %s (stop it, then move it away or choose another directory)",
			ErrOtherTopology, dir, held, want)
	case !held.sameSecurity(want):
		return fmt.Errorf("%w: %s holds a %s started with %s; asked for %s (start it with the same flags and key files)",
			ErrOtherSecurity, dir, held, held.security(), want.security())
	}
	return nil
}

func (st state) String() string {
	what := map[Role]string{RolePlain: "replica set", RoleShard: "shard replica set", RoleConfig: "config server replica set"}[st.Role]
	return fmt.Sprintf("%s %s of %d member(s) on %s:%d", what, st.Name, st.Members, st.Addr, st.BasePort)
}

// readState reads the set file Up wrote into dir.
func readState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(stateFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%s: %w", dir, ErrNoSet)
	}
	if err != nil {
		return st, fmt.Errorf("open replica set: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("open replica set %s: %w", stateFile(dir), err)
	}
	return st, nil
}

// Open loads the set that Up wrote into dir.
func Open(dir string, logger *slog.Logger) (*Set, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	return New(Options{Dir: dir, Name: st.Name, Members: st.Members, Addr: st.Addr, BasePort: st.BasePort,
		Role: st.Role, CacheGB: st.CacheGB, CacheDir: st.CacheDir, Logger: logger,
		Security: Security{Auth: st.Auth, AdminUser: st.AdminUser, KeyFile: st.KeyFile, TLS: st.TLS,
			CAFile: st.CAFile, CertKeyFile: st.CertKeyFile}})
}

// Name is the replica set name.
func (s *Set) Name() string { return s.opts.Name }

// Dir is the set directory.
func (s *Set) Dir() string { return s.opts.Dir }

// Members returns the set's members, member 0 first.
func (s *Set) Members() []Member { return append([]Member(nil), s.members...) }

// Hosts returns every member's host:port.
func (s *Set) Hosts() []string {
	h := make([]string, len(s.members))
	for i, m := range s.members {
		h[i] = m.Host
	}
	return h
}

// URI is the connection string of the whole set, with the TLS options when the set requires
// TLS; never with credentials.
func (s *Set) URI() string {
	return s.withTLS("mongodb://" + strings.Join(s.Hosts(), ",") + "/?replicaSet=" + s.opts.Name)
}

// MemberURI connects to member i alone (no discovery), e.g. to read from one secondary.
func (s *Set) MemberURI(i int) string {
	return s.withTLS("mongodb://" + s.members[i].Host + "/?directConnection=true")
}

func (s *Set) withTLS(uri string) string {
	if o := s.opts.Security.uriOptions(); o != "" {
		return uri + "&" + o
	}
	return uri
}

func (s *Set) member(i int) (Member, error) {
	if i < 0 || i >= len(s.members) {
		return Member{}, fmt.Errorf("member %d: the set has %d", i, len(s.members))
	}
	return s.members[i], nil
}

// state is what set.json records of s.
func (s *Set) state() state {
	sec := s.opts.Security
	return state{Name: s.opts.Name, Members: s.opts.Members, Addr: s.opts.Addr,
		BasePort: s.opts.BasePort, Role: s.opts.Role, CacheGB: s.opts.CacheGB, CacheDir: s.opts.CacheDir,
		Auth: sec.Auth, AdminUser: sec.AdminUser, KeyFile: sec.KeyFile, TLS: sec.TLS, CAFile: sec.CAFile, CertKeyFile: sec.CertKeyFile}
}

func (s *Set) prepare(ctx context.Context) error {
	if s.bin != "" {
		return nil
	}
	want := s.state()
	if err := checkHeld(s.opts.Dir, want); err != nil {
		return err
	}
	bin, err := EnsureMongod(ctx, s.opts.CacheDir)
	if err != nil {
		return err
	}
	s.bin = bin
	if err := os.MkdirAll(s.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("set dir: %w", err)
	}
	if err := s.keys.make(s.opts.Addr); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(want, "", "  ")
	if err := os.WriteFile(stateFile(s.opts.Dir), b, 0o644); err != nil {
		return fmt.Errorf("set dir: %w", err)
	}
	return nil
}

// Up starts every member that is not running, initiates the set when it is new, and waits for
// a PRIMARY and for every other member to be SECONDARY.
func (s *Set) Up(ctx context.Context) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	errs := make(chan error, len(s.members))
	for i := range s.members {
		go func() { errs <- s.StartMember(ctx, i) }()
	}
	var all []error
	for range s.members {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	// A member that dies from here on (a fatal assertion on the set's config, say) fails Up at
	// once with its log's fatal lines, instead of leaving WaitHealthy to its timeout.
	ctx, explain, stop := serverproc.FailOnExit(ctx, s.started(), s.exitedAt)
	defer stop()
	if err := s.initiate(ctx); err != nil {
		return explain(err)
	}
	if err := s.createAdmin(ctx); err != nil {
		return explain(err)
	}
	return explain(s.WaitHealthy(ctx))
}

// args is member m's command line.
func (s *Set) args(m Member) []string {
	a := []string{
		"--replSet", s.opts.Name,
		"--bind_ip", s.opts.Addr,
		"--port", strconv.Itoa(s.opts.BasePort + m.Index),
		"--dbpath", m.dbPath(),
		"--logpath", m.LogPath(), "--logappend",
		"--wiredTigerCacheSizeGB", strconv.FormatFloat(s.opts.CacheGB, 'f', -1, 64),
		"--oplogSize", strconv.Itoa(s.opts.OplogMB),
		"--setParameter", "diagnosticDataCollectionEnabled=false",
	}
	if s.opts.Role != RolePlain {
		a = append(a, "--"+string(s.opts.Role))
	}
	a = append(a, s.opts.Security.args()...)
	return append(a, s.opts.ExtraArgs...)
}

// livePID returns the pid in member m's pidfile if that process is this member's mongod.
func (s *Set) livePID(m Member) (int, bool) {
	return serverproc.ReadPID(m.pidFile(), memberMarker(m.Dir))
}

// memberMarker is what the command line of the mongod of member directory dir contains.
func memberMarker(dir string) string {
	return "\x00--dbpath\x00" + Member{Dir: dir}.dbPath() + "\x00"
}

// PID returns member i's mongod process id while it runs (fault tests aim at it).
func (s *Set) PID(i int) (int, bool) {
	m, err := s.member(i)
	if err != nil {
		return 0, false
	}
	return s.livePID(m)
}

// Running reports whether member i's mongod is alive.
func (s *Set) Running(i int) bool {
	m, err := s.member(i)
	if err != nil {
		return false
	}
	_, ok := s.livePID(m)
	return ok
}

// StartMember starts member i if it is not running and waits until it answers hello.
func (s *Set) StartMember(ctx context.Context, i int) error {
	m, err := s.member(i)
	if err != nil {
		return err
	}
	if err := s.prepare(ctx); err != nil {
		return err
	}
	log := s.opts.Logger.With("set", s.opts.Name, "member", i, "host", m.Host)
	if _, ok := s.livePID(m); ok {
		s.forgetExited(i) // started by another process since
		return s.waitHello(ctx, m)
	}
	if conn, err := net.DialTimeout("tcp", m.Host, 200*time.Millisecond); err == nil {
		_ = conn.Close()
		return fmt.Errorf("member %d: %s is already in use by another process (another set on these ports? stop it or choose another --port)", i, m.Host)
	}
	if err := os.MkdirAll(m.dbPath(), 0o755); err != nil {
		return fmt.Errorf("member %d: %w", i, err)
	}
	out, err := os.OpenFile(m.stdoutPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("member %d: %w", i, err)
	}
	defer out.Close() // the child holds its own descriptor
	cmd := exec.Command(s.bin, s.args(m)...)
	cmd.Dir = m.Dir
	cmd.Stdout, cmd.Stderr = out, out
	from := logOffsets{log: serverproc.LogSize(m.LogPath()), stdout: serverproc.LogSize(m.stdoutPath())}
	start := time.Now()
	p, err := serverproc.Start(cmd, m.pidFile(), s.opts.DieWithParent)
	if err != nil {
		return fmt.Errorf("member %d: start %s: %w", i, s.bin, err)
	}
	s.mu.Lock()
	s.procs[i], s.logFrom[i] = p, from
	s.mu.Unlock()
	if err := s.waitHello(ctx, m); err != nil {
		return err
	}
	log.Debug("mongod answers", "pid", p.PID, "boot", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// exited tells whether member m's mongod is gone, and how.
func (s *Set) exited(m Member) (bool, string) {
	s.mu.Lock()
	p := s.procs[m.Index]
	s.mu.Unlock()
	if p != nil {
		return p.Exited()
	}
	if _, ok := s.livePID(m); !ok {
		return true, "no live process in its pidfile"
	}
	return false, ""
}

// waitHello polls member m until it answers hello, failing early if it exits.
func (s *Set) waitHello(ctx context.Context, m Member) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	for {
		if gone, how := s.exited(m); gone {
			return s.exitError(m, how)
		}
		if err := s.ping(ctx, m); err == nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("member %d (%s) did not answer within %s: %w; log: %s", m.Index, m.Host, s.opts.BootTimeout, err, m.LogPath())
		}
	}
}

func (s *Set) ping(ctx context.Context, m Member) error {
	conn, err := net.DialTimeout("tcp", m.Host, time.Second)
	if err != nil {
		return err
	}
	_ = conn.Close()
	return s.withMember(ctx, m.Index, func(c *mongo.Client) error {
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Err()
	})
}

// withMember runs fn with a client connected to member i alone, with no login: enough for
// hello and buildInfo, and for the localhost exception.
func (s *Set) withMember(ctx context.Context, i int, fn func(*mongo.Client) error) error {
	return s.withMemberAs(ctx, i, false, fn)
}

// withMemberAs is withMember, logged in with the keyFile's internal identity when internal, or
// as the user of login when one is given.
func (s *Set) withMemberAs(ctx context.Context, i int, internal bool, fn func(*mongo.Client) error, login ...options.Credential) error {
	o, err := s.opts.Security.clientOptions(s.MemberURI(i), internal)
	if err != nil {
		return err
	}
	for _, cred := range login {
		o.SetAuth(cred)
	}
	c, err := mongo.Connect(o.SetServerSelectionTimeout(2 * time.Second).SetConnectTimeout(2 * time.Second))
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Disconnect(dctx)
	}()
	return fn(c)
}

// initiate runs replSetInitiate on member 0 unless the set already has a config.
func (s *Set) initiate(ctx context.Context) error {
	members := bson.A{}
	for _, m := range s.members {
		prio := 1
		if m.Index == 0 {
			prio = 2 // the same member wins after a restart
		}
		members = append(members, bson.D{{Key: "_id", Value: m.Index}, {Key: "host", Value: m.Host}, {Key: "priority", Value: prio}})
	}
	cfg := bson.D{{Key: "_id", Value: s.opts.Name}}
	if s.opts.Role == RoleConfig {
		cfg = append(cfg, bson.E{Key: "configsvr", Value: true})
	}
	cfg = append(cfg, bson.E{Key: "members", Value: members})
	var settings bson.D
	if s.opts.ElectionTimeout > 0 {
		settings = append(settings, bson.E{Key: "electionTimeoutMillis", Value: s.opts.ElectionTimeout.Milliseconds()})
	}
	if s.opts.NoCatchUp {
		settings = append(settings, bson.E{Key: "catchUpTimeoutMillis", Value: 0})
	}
	if len(settings) > 0 {
		cfg = append(cfg, bson.E{Key: "settings", Value: settings})
	}
	run := func(internal bool) error {
		return s.withMemberAs(ctx, 0, internal, func(c *mongo.Client) error {
			return c.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetInitiate", Value: cfg}}).Err()
		})
	}
	// A new set is initiated through the localhost exception; a set with users refuses that
	// (Unauthorized) and is asked again by a logged-in client.
	err := run(false)
	var ce mongo.CommandError
	if s.opts.Security.Auth && errors.As(err, &ce) && ce.Code == 13 {
		err = run(true)
	}
	if errors.As(err, &ce) && ce.Code == 23 { // AlreadyInitialized: a restart of an existing set
		return nil
	}
	if err != nil {
		return fmt.Errorf("replSetInitiate %s: %w", s.opts.Name, err)
	}
	return nil
}

// MemberState is one member as replSetGetStatus reports it.
type MemberState struct {
	Index   int
	Host    string
	State   string // PRIMARY, SECONDARY, … or "DOWN" when its process is not running
	Healthy bool
	Version string
}

// Status asks each running member for its own state and version.
func (s *Set) Status(ctx context.Context) []MemberState {
	out := make([]MemberState, len(s.members))
	for i, m := range s.members {
		out[i] = MemberState{Index: i, Host: m.Host, State: "DOWN"}
		if _, ok := s.livePID(m); !ok {
			continue
		}
		_ = s.withMember(ctx, i, func(c *mongo.Client) error {
			var hello struct {
				Primary   bool `bson:"isWritablePrimary"`
				Secondary bool `bson:"secondary"`
				Arbiter   bool `bson:"arbiterOnly"`
			}
			var build struct {
				Version string `bson:"version"`
			}
			admin := c.Database("admin")
			if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
				out[i].State = "UNREACHABLE"
				return err
			}
			_ = admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build)
			out[i].Version, out[i].Healthy = build.Version, true
			switch {
			case hello.Primary:
				out[i].State = "PRIMARY"
			case hello.Secondary:
				out[i].State = "SECONDARY"
			default:
				out[i].State = "OTHER" // STARTUP2, RECOVERING, removed, …
			}
			return nil
		})
	}
	return out
}

// Primary returns the index of the member that is PRIMARY now, or -1.
func (s *Set) Primary(ctx context.Context) int {
	for _, st := range s.Status(ctx) {
		if st.State == "PRIMARY" {
			return st.Index
		}
	}
	return -1
}

// WaitPrimary waits until some running member is PRIMARY and returns its index.
func (s *Set) WaitPrimary(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	for {
		if p := s.Primary(ctx); p >= 0 {
			return p, nil
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return -1, fmt.Errorf("set %s: no PRIMARY within %s: %w", s.opts.Name, s.opts.BootTimeout, err)
		}
	}
}

// WaitHealthy waits until one running member is PRIMARY and every other running member is
// SECONDARY.
func (s *Set) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	var last []MemberState
	for {
		last = s.Status(ctx)
		primaries, ok := 0, true
		for _, st := range last {
			switch st.State {
			case "PRIMARY":
				primaries++
			case "SECONDARY", "DOWN":
			default:
				ok = false
			}
		}
		if ok && primaries == 1 {
			return nil
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("set %s not healthy within %s: %v", s.opts.Name, s.opts.BootTimeout, last)
		}
	}
}

// Kill SIGKILLs member i: a crash, no shutdown.
func (s *Set) Kill(ctx context.Context, i int) error {
	return s.signalAndWait(ctx, i, syscall.SIGKILL)
}

// StopMember shuts member i down cleanly (SIGTERM), SIGKILL after StopTimeout.
func (s *Set) StopMember(ctx context.Context, i int) error {
	return s.signalAndWait(ctx, i, syscall.SIGTERM)
}

// Pause freezes member i (SIGSTOP): it holds its connections but answers nothing, the way a
// stalled disk or a long GC pause looks to its peers.
func (s *Set) Pause(i int) error { return s.signal(i, syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Set) Resume(i int) error { return s.signal(i, syscall.SIGCONT) }

func (s *Set) signal(i int, sig syscall.Signal) error {
	m, err := s.member(i)
	if err != nil {
		return err
	}
	pid, ok := s.livePID(m)
	if !ok {
		return fmt.Errorf("member %d is not running", i)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("member %d: %s: %w", i, sig, err)
	}
	return nil
}

func (s *Set) signalAndWait(ctx context.Context, i int, sig syscall.Signal) error {
	m, err := s.member(i)
	if err != nil {
		return err
	}
	pid, ok := s.livePID(m)
	if !ok {
		return nil
	}
	if err := serverproc.SignalAndWait(ctx, pid, sig, s.opts.StopTimeout, func() bool { return s.alive(m) }, s.opts.Logger); err != nil {
		return fmt.Errorf("member %d: %w", i, err)
	}
	_ = os.Remove(m.pidFile())
	return nil
}

func (s *Set) alive(m Member) bool {
	s.mu.Lock()
	p := s.procs[m.Index]
	s.mu.Unlock()
	if p != nil {
		if gone, _ := p.Exited(); gone {
			return false
		}
	}
	_, ok := s.livePID(m)
	return ok
}

// Down stops the set cleanly: secondaries first, then the primary (which would otherwise
// wait for a secondary to catch up).
func (s *Set) Down(ctx context.Context) error {
	primary := s.Primary(ctx)
	var all []error
	errs := make(chan error, len(s.members))
	n := 0
	for i := range s.members {
		if i != primary {
			n++
			go func() { errs <- s.StopMember(ctx, i) }()
		}
	}
	for range n {
		all = append(all, <-errs)
	}
	if primary >= 0 {
		all = append(all, s.StopMember(ctx, primary))
	}
	return errors.Join(all...)
}

// KillAll SIGKILLs every member without waiting for a shutdown; for throwaway test data.
func (s *Set) KillAll() {
	for i, m := range s.members {
		if pid, ok := s.livePID(m); ok {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		s.mu.Lock()
		p := s.procs[i]
		s.mu.Unlock()
		if p != nil {
			p.Kill()
		}
		_ = os.Remove(m.pidFile())
	}
}

// tail returns the last lines of member m's log, for startup failures.
func (s *Set) tail(m Member) string {
	var b strings.Builder
	for _, f := range []string{m.stdoutPath(), m.LogPath()} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 12 {
			lines = lines[len(lines)-12:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// LogTail is the end of member i's log, for a failed test.
func (s *Set) LogTail(i int) string { return s.tail(s.members[i]) }

// logOffsets are the sizes of a member's logs when it was last started.
type logOffsets struct{ log, stdout int64 }

func (m Member) stdoutPath() string { return filepath.Join(m.Dir, "stdout.log") }

// started are the mongods this process started, by member.
func (s *Set) started() map[int]*serverproc.Child {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.procs)
}

// forgetExited drops member i's mongod of an earlier start once it has exited.
func (s *Set) forgetExited(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[i]; p != nil {
		if gone, _ := p.Exited(); gone {
			delete(s.procs, i)
		}
	}
}

// exitedAt is the error of member i's mongod p exiting, for FailOnExit.
func (s *Set) exitedAt(i int, p *serverproc.Child) error {
	_, how := p.Exited()
	return s.exitError(s.members[i], how)
}

// exitError says that member m died while starting, how, and why in its own words.
func (s *Set) exitError(m Member, how string) error {
	return fmt.Errorf("%w: set %s member %d (%s), while starting (%s):\n  %s",
		serverproc.ErrExited, s.opts.Name, m.Index, m.Host, how, s.fatalLines(m))
}

// fatalLines picks why member m's last start failed from what that start wrote: mongod's
// fatal and error entries ("s":"F" and "E" in its JSON log), else the end of its output.
func (s *Set) fatalLines(m Member) string {
	s.mu.Lock()
	from := s.logFrom[m.Index]
	s.mu.Unlock()
	var picked []string
	for _, l := range serverproc.LogLinesSince(m.LogPath(), from.log) {
		var e struct {
			S    string          `json:"s"`
			Msg  string          `json:"msg"`
			Attr json.RawMessage `json:"attr"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.S != "F" && e.S != "E" {
			continue
		}
		line := e.S + " " + strings.TrimSpace(e.Msg)
		if len(e.Attr) > 0 {
			line += " " + string(e.Attr)
		}
		picked = append(picked, clip(line, 500))
	}
	if len(picked) == 0 { // killed, say: what it was doing
		picked = lastLines(serverproc.LogLinesSince(m.LogPath(), from.log), 5)
	}
	if len(picked) == 0 { // refused before its log was open (a bad option): it said so on stdout
		picked = serverproc.LogLinesSince(m.stdoutPath(), from.stdout)
	}
	picked = lastLines(picked, 8)
	return strings.Join(append(picked, "(log: "+m.LogPath()+")"), "\n  ")
}

func lastLines(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
