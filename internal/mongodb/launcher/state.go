package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/shardmart/shardmart/internal/serverproc"
)

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
	err := serverproc.ReadState(stateFile(dir), "replica set", &st)
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("%s: %w", dir, ErrNoSet)
	}
	return st, err
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

// state is what set.json records of s.
func (s *Set) state() state {
	sec := s.opts.Security
	return state{Name: s.opts.Name, Members: s.opts.Members, Addr: s.opts.Addr,
		BasePort: s.opts.BasePort, Role: s.opts.Role, CacheGB: s.opts.CacheGB, CacheDir: s.opts.CacheDir,
		Auth: sec.Auth, AdminUser: sec.AdminUser, KeyFile: sec.KeyFile, TLS: sec.TLS, CAFile: sec.CAFile, CertKeyFile: sec.CertKeyFile}
}
