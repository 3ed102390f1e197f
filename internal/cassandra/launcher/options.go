package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// Options describe a local cluster. Zero values take the defaults noted.
type Options struct {
	Nodes    int    // 1..9, default 1
	Dir      string // cluster directory (configs, data, logs, pidfiles); required
	BaseAddr string // first node's address, default 127.0.0.1; node i gets BaseAddr+i
	Name     string // cluster_name, default "shardmart"
	HeapMB   int    // per node, default 384
	// Sizing is the nodes' memtable space, request threads and GC pause goal; zero fields take
	// SmallHost's.
	Sizing   Sizing
	Version  string // Cassandra version, default DefaultVersion
	CacheDir string // jar cache, default DefaultCacheDir()
	// DieWithParent asks the kernel to SIGKILL each JVM when the starting process dies
	// (PR_SET_PDEATHSIG), so a crashed or killed `go test` leaves no JVM behind. Off for
	// `shardmart cassandra up`, whose nodes outlive the command.
	DieWithParent bool
	// DCNodes, when set, spreads the nodes over data centres dc1, dc2, ... (DCNodes[i] nodes in
	// DC i+1, GossipingPropertyFileSnitch) and Nodes is their sum. Without it every node is in
	// datacenter1.
	DCNodes []int
	// Auth turns on PasswordAuthenticator, CassandraAuthorizer and CassandraRoleManager. The
	// superuser is Cassandra's default (SuperUser); with several DCs, Up replicates system_auth
	// to every DC so each DC logs its users in on its own.
	Auth bool
	// TLS turns on client encryption (CQL over TLS only, internode traffic stays plain). The
	// launcher makes a CA and the certificates (TLSFiles) unless UserTLS names the user's own
	// PEM keystore and CA.
	TLS     bool
	UserTLS *TLSFiles
	// RequireClientCert makes the nodes require a client certificate signed by the CA (mTLS).
	RequireClientCert bool
	// PaxosVariant is cassandra.yaml's paxos_variant ("v1" or "v2"); empty leaves Cassandra's
	// default (v1 in 5.0).
	PaxosVariant string
	// C1Only stops the JIT at its first tier (-XX:TieredStopAtLevel=1). In a 4-minute
	// robustness run on 2 cores the nodes spent 40% of their CPU in the C2 compiler, which
	// pays off only over a long run; the same bytecode runs, only slower once warm. For short
	// test clusters on small machines, never for benchmarks.
	C1Only      bool
	BootTimeout time.Duration // per node, default 3 minutes
	StopTimeout time.Duration // SIGTERM grace before SIGKILL, default 45 s
	Logger      *slog.Logger  // default slog.Default()
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("launcher: Options.Dir is required")
	}
	if o.PaxosVariant != "" && o.PaxosVariant != "v1" && o.PaxosVariant != "v2" {
		return fmt.Errorf("launcher: paxos variant %q: want v1 or v2", o.PaxosVariant)
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	o.Dir = abs
	if len(o.DCNodes) > 0 {
		if len(o.DCNodes) > 4 {
			return fmt.Errorf("launcher: %d data centres: want at most 4", len(o.DCNodes))
		}
		sum := 0
		for i, n := range o.DCNodes {
			if n < 1 {
				return fmt.Errorf("launcher: data centre dc%d has %d nodes: want at least 1", i+1, n)
			}
			sum += n
		}
		if o.Nodes != 0 && o.Nodes != sum {
			return fmt.Errorf("launcher: %d nodes but data centres of %v", o.Nodes, o.DCNodes)
		}
		o.Nodes = sum
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.UserTLS != nil {
		o.TLS = true
		if o.UserTLS.Keystore == "" || o.UserTLS.CA == "" {
			return errors.New("launcher: TLS with your own files needs a PEM keystore (key and certificate chain) and the CA")
		}
	}
	if o.RequireClientCert && !o.TLS {
		return errors.New("launcher: a required client certificate needs TLS")
	}
	if o.RequireClientCert && o.UserTLS != nil && o.UserTLS.ClientCert == "" {
		// The launcher's readiness checks would be refused by the nodes until the boot timeout.
		return errors.New("launcher: --require-client-cert with your own --tls-keystore/--tls-ca needs a client certificate for the launcher; use the generated files (--tls alone)")
	}
	if o.Nodes < 1 || o.Nodes > 9 {
		return fmt.Errorf("launcher: %d nodes: want 1 to 9", o.Nodes)
	}
	if o.BaseAddr == "" {
		o.BaseAddr = "127.0.0.1"
	}
	if o.Name == "" {
		o.Name = "shardmart"
	}
	if o.HeapMB == 0 {
		o.HeapMB = 384
	}
	o.Sizing = o.Sizing.orSmallHost(o.HeapMB)
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 3 * time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 45 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Sizing is what a node is given of memory and threads. Cassandra's own defaults are for
// servers of 8 cores and more; docs/production.md says what to set there.
type Sizing struct {
	MemtableMiB      int // memtable_heap_space and memtable_offheap_space
	ConcurrentReads  int // concurrent_reads
	ConcurrentWrites int // concurrent_writes and concurrent_counter_writes
	TransportThreads int // native_transport_max_threads
	MaxGCPauseMillis int // G1's pause goal, -XX:MaxGCPauseMillis
}

// SmallHost is the sizing for a node sharing a host of 2 cores. Measured on a one-node cluster
// (docs/evidence/cassandra.md, "Small-host settings and write coalescing"), 128 MiB of memtable
// space and a 50 ms G1 pause goal each beat the values below in three rounds, but together
// they won one round of three against them, and fewer read/write or transport threads won one
// round of two: on a shared 2-core machine the load moved throughput 70-fold between runs, more
// than any of these settings, so none is shown to help and the sizing stays as it was:
// Cassandra's thread counts and G1's goal, 64 MiB memtables (at most a quarter of the heap).
var SmallHost = Sizing{MemtableMiB: 64, ConcurrentReads: 32, ConcurrentWrites: 32, TransportThreads: 128, MaxGCPauseMillis: 200}

// CassandraDefaults is what Cassandra 5.0 and G1 take when nothing is set (memtable space
// as this launcher set it before): the baseline the small-host values were measured against.
var CassandraDefaults = Sizing{MemtableMiB: 64, ConcurrentReads: 32, ConcurrentWrites: 32, TransportThreads: 128, MaxGCPauseMillis: 200}

// orSmallHost fills s's zero fields from SmallHost, for a heap of heapMB.
func (s Sizing) orSmallHost(heapMB int) Sizing {
	for _, f := range []struct {
		v *int
		d int
	}{{&s.MemtableMiB, min(SmallHost.MemtableMiB, heapMB/4)}, {&s.ConcurrentReads, SmallHost.ConcurrentReads},
		{&s.ConcurrentWrites, SmallHost.ConcurrentWrites}, {&s.TransportThreads, SmallHost.TransportThreads},
		{&s.MaxGCPauseMillis, SmallHost.MaxGCPauseMillis}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	return s
}
