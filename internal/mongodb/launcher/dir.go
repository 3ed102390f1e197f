package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Topology is what a directory holds, or is asked to hold: a replica set (Shards 0) at its top,
// or a sharded cluster (cfg/, sh0/, …).
type Topology struct {
	Shards   int    // 0: a replica set
	Members  int    // of the replica set, or of each shard
	Name     string // the replica set's name; a cluster's sets are always cfg, sh0, …
	Addr     string // default 127.0.0.1
	BasePort int    // member 0's, or the config server's
}

func (t Topology) String() string {
	if t.Shards == 0 {
		return fmt.Sprintf("a replica set %s of %d member(s) on %s:%d", t.Name, t.Members, t.Addr, t.BasePort)
	}
	return fmt.Sprintf("a sharded cluster of %d shard(s) of %d member(s) (config server on %s:%d)", t.Shards, t.Members, t.Addr, t.BasePort)
}

// Holds reads what dir holds from the set files Up wrote: nothing, a replica set, a sharded
// cluster, or both (a directory an older launcher used for one and then the other).
func Holds(dir string) ([]Topology, error) {
	var held []Topology
	if st, err := readState(dir); err == nil {
		held = append(held, Topology{Members: st.Members, Name: st.Name, Addr: st.Addr, BasePort: st.BasePort})
	} else if !errors.Is(err, ErrNoSet) {
		return nil, err
	}
	cfg, err := readState(filepath.Join(dir, "cfg"))
	if errors.Is(err, ErrNoSet) {
		return held, nil
	}
	if err != nil {
		return nil, err
	}
	cluster := Topology{Members: 1, Addr: cfg.Addr, BasePort: cfg.BasePort}
	for ; ; cluster.Shards++ {
		sh, err := readState(filepath.Join(dir, fmt.Sprintf("sh%d", cluster.Shards)))
		if errors.Is(err, ErrNoSet) {
			break
		}
		if err != nil {
			return nil, err
		}
		if cluster.Shards == 0 {
			cluster.Members = sh.Members
		}
	}
	return append(held, cluster), nil
}

// CheckDir refuses, with ErrOtherTopology naming what dir holds, a directory holding anything
// but want: a replica set where a cluster is asked for or the reverse, another member or shard
// count, set name, address or port. Its members would wait forever for peers or a config that
// are not there. A directory holding want (running or not) passes and is reused as it is.
func CheckDir(dir string, want Topology) error {
	if want.Addr == "" {
		want.Addr = "127.0.0.1"
	}
	if want.Shards > 0 {
		want.Name = ""
	}
	held, err := Holds(dir)
	if err != nil {
		return err
	}
	for _, h := range held {
		if h != want {
			return fmt.Errorf("%w: %s holds %s; asked for %s (stop it with `shardmart mongo down --dir %s`, then move it away, or choose another --dir)",
				ErrOtherTopology, dir, h, want, dir)
		}
	}
	return nil
}

// DownDir stops every mongod dir holds, whatever left it there: first the sets its set files
// describe, cleanly (a cluster's shards, then its config server; in each set the secondaries
// before the primary), then any other mongod whose pidfile lies under dir (members a set file
// no longer lists, sets of an older layout), SIGTERM then SIGKILL. Only a process whose command
// line names its directory's data is signalled. It returns a line per thing stopped.
func DownDir(ctx context.Context, dir string, log *slog.Logger) ([]string, error) {
	var done []string
	var all []error
	if c, err := OpenCluster(dir, log); err == nil {
		if err := c.Down(ctx); err != nil {
			all = append(all, err)
		}
		done = append(done, fmt.Sprintf("sharded cluster stopped: config server and %d shard(s)", len(c.Shards)))
	} else if !errors.Is(err, ErrNoSet) {
		all = append(all, err)
	}
	if s, err := Open(dir, log); err == nil {
		if err := s.Down(ctx); err != nil {
			all = append(all, err)
		}
		done = append(done, "replica set "+s.Name()+" stopped")
	} else if !errors.Is(err, ErrNoSet) {
		all = append(all, err)
	}
	n, err := serverproc.StopAll(ctx, dir, "mongod.pid", memberMarker, []string{"db"}, 30*time.Second, log)
	if n > 0 {
		done = append(done, fmt.Sprintf("%d other mongod(s) stopped (no set file lists them)", n))
	}
	return done, errors.Join(append(all, err)...)
}
