package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/serverproc"
)

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
	keys    Keys              // the security files the launcher makes for this set
	procs   *serverproc.Group // the members' mongods, by member index
}

// New validates opts and lays out the members; nothing starts.
func New(opts Options) (*Set, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	keys := opts.Security.fill(opts.Dir)
	s := &Set{opts: opts, keys: keys}
	var servers []serverproc.Server
	for i := range opts.Members {
		m := Member{
			Index: i,
			Host:  net.JoinHostPort(opts.Addr, strconv.Itoa(opts.BasePort+i)),
			Dir:   filepath.Join(opts.Dir, "m"+strconv.Itoa(i)),
		}
		s.members = append(s.members, m)
		servers = append(servers, serverproc.Server{PIDFile: m.pidFile(), Marker: memberMarker(m.Dir)})
	}
	s.procs = serverproc.NewGroup(servers)
	return s, nil
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
	if err := serverproc.WriteState(stateFile(s.opts.Dir), want); err != nil {
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
	ctx, explain, stop := serverproc.FailOnExit(ctx, s.procs.Started(), s.exitedAt)
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
	return s.procs.LivePID(m.Index)
}

// memberMarker is what the command line of the mongod of member directory dir contains.
func memberMarker(dir string) string {
	return "\x00--dbpath\x00" + Member{Dir: dir}.dbPath() + "\x00"
}

// PID returns member i's mongod process id while it runs (fault tests aim at it).
func (s *Set) PID(i int) (int, bool) {
	return s.procs.LivePID(i)
}

// Running reports whether member i's mongod is alive.
func (s *Set) Running(i int) bool {
	_, ok := s.procs.LivePID(i)
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
		s.procs.ForgetExited(i) // started by another process since
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
	start := time.Now()
	p, err := s.procs.Start(i, cmd, s.opts.DieWithParent, m.LogPath(), m.stdoutPath())
	if err != nil {
		return fmt.Errorf("member %d: start %s: %w", i, s.bin, err)
	}
	if err := s.waitHello(ctx, m); err != nil {
		return err
	}
	log.Debug("mongod answers", "pid", p.PID, "boot", time.Since(start).Round(10*time.Millisecond))
	return nil
}

// exited tells whether member m's mongod is gone while it starts, and how.
func (s *Set) exited(m Member) (bool, string) { return s.procs.Exited(m.Index) }

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
	if _, err := s.member(i); err != nil {
		return err
	}
	if err := s.procs.SignalProcess(i, sig); errors.Is(err, serverproc.ErrNotRunning) {
		return fmt.Errorf("member %d is not running", i)
	} else if err != nil {
		return fmt.Errorf("member %d: %w", i, err)
	}
	return nil
}

func (s *Set) signalAndWait(ctx context.Context, i int, sig syscall.Signal) error {
	if _, err := s.member(i); err != nil {
		return err
	}
	if err := s.procs.Stop(ctx, i, sig, s.opts.StopTimeout, s.opts.Logger, ""); err != nil {
		return fmt.Errorf("member %d: %w", i, err)
	}
	return nil
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
func (s *Set) KillAll() { s.procs.KillAll() }
