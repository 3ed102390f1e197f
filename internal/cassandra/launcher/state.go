package launcher

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// stateFile remembers the topology so `down`, `status` and `repair` work from another process.
func stateFile(dir string) string { return filepath.Join(dir, "cluster.json") }

type state struct {
	Nodes    int    `json:"nodes"`
	BaseAddr string `json:"base_addr"`
	Name     string `json:"name"`
	HeapMB   int    `json:"heap_mb"`
	Version  string `json:"version"`
	CacheDir string `json:"cache_dir"`
	DCNodes  []int  `json:"dc_nodes,omitempty"`
	Auth     bool   `json:"auth,omitempty"`
	TLS      bool   `json:"tls,omitempty"`
	// UserTLS: the user's own files (absent: the launcher's, under tls/).
	UserTLS           *TLSFiles `json:"user_tls,omitempty"`
	RequireClientCert bool      `json:"require_client_cert,omitempty"`
}

// ErrNoCluster means the directory holds no cluster written by Up.
var ErrNoCluster = errors.New("no cluster in directory (run `shardmart cassandra up` first)")

// ErrOtherTopology means the directory holds a cluster of another size, on other addresses or
// with other login/TLS settings: its nodes keep the ring they had, so nothing starts.
var ErrOtherTopology = errors.New("the directory holds another cluster's data")

// readState reads the state file Up wrote into dir.
func readState(dir string) (state, error) {
	var s state
	err := serverproc.ReadState(stateFile(dir), "cluster", &s)
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%s: %w", dir, ErrNoCluster)
	}
	return s, err
}

// writeState records the cluster in its state file.
func (c *Cluster) writeState() error {
	err := serverproc.WriteState(stateFile(c.opts.Dir), state{Nodes: c.opts.Nodes, BaseAddr: c.opts.BaseAddr, Name: c.opts.Name,
		HeapMB: c.opts.HeapMB, Version: c.opts.Version, CacheDir: c.opts.CacheDir, DCNodes: c.opts.DCNodes,
		Auth: c.opts.Auth, TLS: c.opts.TLS, UserTLS: c.opts.UserTLS, RequireClientCert: c.opts.RequireClientCert})
	if err != nil {
		return fmt.Errorf("cluster dir: %w", err)
	}
	return nil
}

// checkHeld refuses to start the cluster in a directory that holds another one, or this one
// with other login/TLS settings; a directory with no cluster passes.
func (c *Cluster) checkHeld() error {
	// Each node keeps the tokens and peers it first started with, whatever the new layout says:
	// a 3-node cluster's node started alone owns a third of the ring and waits for the others.
	held, err := readState(c.opts.Dir)
	switch {
	case errors.Is(err, ErrNoCluster):
	case err != nil:
		return err
	case held.Nodes != c.opts.Nodes || held.BaseAddr != c.opts.BaseAddr || !slices.Equal(held.DCNodes, c.opts.DCNodes):
		return fmt.Errorf("%w: %s holds a %d-node cluster from %s; asked for %d node(s) from %s (stop it with `shardmart cassandra down`, then move it away, or choose another --cassandra-dir)",
			ErrOtherTopology, c.opts.Dir, held.Nodes, held.BaseAddr, c.opts.Nodes, c.opts.BaseAddr)
	case held.Auth != c.opts.Auth || held.TLS != c.opts.TLS || held.RequireClientCert != c.opts.RequireClientCert:
		// Starting without login or TLS would rewrite the state and open the data to anyone.
		return fmt.Errorf("%w: %s holds a cluster with %s; asked for %s (give the same flags, or stop it with `shardmart cassandra down` and choose another --cassandra-dir)",
			ErrOtherTopology, c.opts.Dir, securityFlags(held.Auth, held.TLS, held.RequireClientCert), securityFlags(c.opts.Auth, c.opts.TLS, c.opts.RequireClientCert))
	}
	return nil
}

// Open loads the cluster that Up wrote into dir.
func Open(dir string, logger *slog.Logger) (*Cluster, error) {
	s, err := readState(dir)
	if err != nil {
		return nil, err
	}
	return New(Options{Dir: dir, Nodes: s.Nodes, BaseAddr: s.BaseAddr, Name: s.Name, HeapMB: s.HeapMB,
		Version: s.Version, CacheDir: s.CacheDir, Logger: logger, DCNodes: s.DCNodes, Auth: s.Auth, TLS: s.TLS,
		UserTLS: s.UserTLS, RequireClientCert: s.RequireClientCert})
}

// securityFlags names the `cassandra up` flags of a login/TLS setting.
func securityFlags(auth, tls, clientCert bool) string {
	var f []string
	if auth {
		f = append(f, "--auth")
	}
	if tls {
		f = append(f, "--tls")
	}
	if clientCert {
		f = append(f, "--require-client-cert")
	}
	if len(f) == 0 {
		return "no --auth/--tls"
	}
	return strings.Join(f, " ")
}
