package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
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
