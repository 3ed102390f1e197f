package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// ErrNotEmpty is returned (wrapped) when the target keyspace already holds tables: a restore
// never mixes the backup's rows with others.
var ErrNotEmpty = errors.New("restore: the target keyspace already holds tables")

// RestoreOptions configure a restore.
type RestoreOptions struct {
	// Conn is the target cluster; sstableloader learns its ring from the same contact points.
	Conn Conn
	Dir  string // the backup directory
	// Keyspace is the target keyspace; default the backup's.
	Keyspace string
	// RF is the replication factor in each data centre of the target; 0: min(3, the DC's nodes).
	RF int
	// CacheDir and Version locate the Cassandra jars sstableloader runs from (launcher defaults).
	CacheDir, Version string
	// Parallel is how many sstableloader JVMs run at once, default 2; each streams its share of
	// the tables one after another.
	Parallel int
	Progress io.Writer
}

// RestoreResult is what a restore loaded.
type RestoreResult struct {
	Manifest    backup.Manifest
	Keyspace    string
	Replication map[string]int
	Loaded      map[string]int64 // rows per table, counted at ALL after the load
}

// Restore verifies the backup against its manifest, creates the keyspace (replication adapted
// to the target) and its schema in an empty target, streams every node's SSTables of every
// table with sstableloader (the rows go to their owners on the target's ring, whatever its
// size), then counts the rows at ALL and compares them with the manifest. Any difference is an
// error wrapping backup.ErrMismatch; the loaded rows stay for inspection.
func Restore(ctx context.Context, o RestoreOptions) (RestoreResult, error) {
	start := time.Now()
	say := progress(o.Progress)
	if o.Parallel <= 0 {
		o.Parallel = 2
	}
	if o.Conn.TLS.CAFile != "" {
		// sstableloader wants a JKS truststore for client TLS; the PEM files do not carry over.
		return RestoreResult{}, errors.New("restore: over TLS is not supported: sstableloader needs a JKS truststore; restore from a host the cluster accepts plain CQL from")
	}
	m, err := backup.Verify(o.Dir)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	if m.Store != "cassandra" {
		return RestoreResult{}, fmt.Errorf("restore: %s is a %s backup, not a Cassandra one", o.Dir, m.Store)
	}
	say("backup %s verified: %d files, keyspace %s, consistent at %s", o.Dir, len(m.Files), m.Meta[metaKeyspace], m.ConsistentAt.Format(time.RFC3339Nano))
	src := m.Meta[metaKeyspace]
	res := RestoreResult{Manifest: m, Keyspace: o.Keyspace}
	if res.Keyspace == "" {
		res.Keyspace = src
	}
	s, err := o.Conn.open(ctx)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer s.Close()
	if res.Replication, err = replication(ring(s), o.RF); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	have, err := tables(ctx, s, res.Keyspace)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	if len(have) > 0 {
		return res, fmt.Errorf("%w: %s has %d (%s); restore into an empty keyspace, or drop it first", ErrNotEmpty, res.Keyspace, len(have), strings.Join(have, ", "))
	}
	if err := createSchema(ctx, s, o.Dir, src, res.Keyspace, res.Replication); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	names, err := tables(ctx, s, res.Keyspace)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	say("created keyspace %s (replication %s) and %d tables", res.Keyspace, replicationCQL(res.Replication), len(names))

	loadStart := time.Now()
	if err := loadAll(ctx, o, m, res.Keyspace, say); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	say("streamed every table in %s", since(loadStart))

	countStart := time.Now()
	if res.Loaded, err = countRows(ctx, s, res.Keyspace, names); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	say("counted %d rows in %d tables at ALL (%s)", sum(res.Loaded), len(res.Loaded), since(countStart))
	if err := checkCounts(m, res.Loaded); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	say("restored %s into %s: every table's count matches the manifest (%s in all)", o.Dir, res.Keyspace, since(start))
	return res, nil
}

// replication is the target's replication per data centre: rf, or min(3, the DC's nodes).
func replication(r []ringNode, rf int) (map[string]int, error) {
	nodes := map[string]int{}
	for _, n := range r {
		nodes[n.DC]++
	}
	out := map[string]int{}
	for dc, n := range nodes {
		switch {
		case rf == 0:
			out[dc] = min(3, n)
		case rf > n:
			return nil, fmt.Errorf("replication factor %d in data centre %s, which has %d node(s): QUORUM could never be met (choose at most %d)", rf, dc, n, n)
		default:
			out[dc] = rf
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the target shows no node")
	}
	return out, nil
}

// replicationCQL is the keyspace's replication map for NetworkTopologyStrategy.
func replicationCQL(r map[string]int) string {
	dcs := make([]string, 0, len(r))
	for dc := range r {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	parts := []string{"'class': 'NetworkTopologyStrategy'"}
	for _, dc := range dcs {
		parts = append(parts, fmt.Sprintf("'%s': %d", strings.ReplaceAll(dc, "'", "''"), r[dc]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// createSchema creates the keyspace with the target's replication, then the backup's types,
// tables and indexes (renamed into keyspace when it differs from the backup's), waiting for
// schema agreement after each.
func createSchema(ctx context.Context, s *gocql.Session, dir, src, keyspace string, repl map[string]int) error {
	text, err := os.ReadFile(filepath.Join(dir, SchemaFile))
	if err != nil {
		return fmt.Errorf("read the backup's schema: %w", err)
	}
	replCQL := replicationCQL(repl)
	stmts := []string{
		fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s", quoteIdent(keyspace), replCQL),
		// An existing empty keyspace takes the target's replication too.
		fmt.Sprintf("ALTER KEYSPACE %s WITH replication = %s", quoteIdent(keyspace), replCQL),
	}
	for _, st := range splitStatements(string(text)) {
		if strings.HasPrefix(st, "CREATE KEYSPACE ") {
			continue
		}
		stmts = append(stmts, ifNotExists(strings.ReplaceAll(st, " "+src+".", " "+quoteIdent(keyspace)+".")))
	}
	for _, st := range stmts {
		if err := s.Query(st).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("create schema: %s: %w", firstLine(st), err)
		}
		if err := s.AwaitSchemaAgreement(ctx); err != nil {
			return fmt.Errorf("create schema: %s: schema agreement: %w", firstLine(st), err)
		}
	}
	return nil
}

var createPrefix = regexp.MustCompile(`^CREATE (TABLE|TYPE|INDEX|CUSTOM INDEX|MATERIALIZED VIEW|FUNCTION|AGGREGATE) `)

// ifNotExists makes a DESCRIBE statement idempotent, so a restore interrupted while it created
// the schema can run again.
func ifNotExists(st string) string {
	if strings.Contains(st, " IF NOT EXISTS ") {
		return st
	}
	if loc := createPrefix.FindStringIndex(st); loc != nil {
		return st[:loc[1]] + "IF NOT EXISTS " + st[loc[1]:]
	}
	return st
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// sstableName is an SSTable component's file name: format version, generation (an integer,
// or a time-ordered id in base 36 when uuid_sstable_identifiers_enabled), format, component.
var sstableName = regexp.MustCompile(`^([a-z]{2})-([0-9a-z_]+)-(big|bti)-(.+)$`)

// loadAll streams every table's SSTables, from every node of the backup, into keyspace.
func loadAll(ctx context.Context, o RestoreOptions, m backup.Manifest, keyspace string, say func(string, ...any)) error {
	var nodes []NodeSnapshot
	if err := json.Unmarshal([]byte(m.Meta[metaNodes]), &nodes); err != nil {
		return fmt.Errorf("manifest: nodes: %w", err)
	}
	work, err := os.MkdirTemp("", "shardmart-restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	loader, err := launcher.NewSSTableLoader(ctx, o.CacheDir, o.Version, work)
	if err != nil {
		return err
	}
	staged, err := stage(o.Dir, nodes, filepath.Join(work, keyspace))
	if err != nil {
		return err
	}
	hosts, port := loaderHosts(o.Conn.Hosts)
	opts := []string{"-d", hosts, "-p", port, "-k", keyspace, "--no-progress"}
	if o.Conn.Username != "" {
		opts = append(opts, "-u", o.Conn.Username, "-pw", o.Conn.Password)
	}
	// One JVM per group of tables (its start costs more CPU than a small table's stream), the
	// groups balanced by bytes.
	groups := make([][]stagedTable, min(o.Parallel, len(staged)))
	sizes := make([]int64, len(groups))
	for _, t := range staged {
		g := 0
		for i := range sizes {
			if sizes[i] < sizes[g] {
				g = i
			}
		}
		groups[g] = append(groups[g], t)
		sizes[g] += t.bytes
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[gi] = loadGroup(ctx, loader, opts, group, say)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadGroup streams a group of tables with one sstableloader JVM, reporting each as it is done.
func loadGroup(ctx context.Context, loader *launcher.SSTableLoader, opts []string, group []stagedTable, say func(string, ...any)) error {
	by := map[string]stagedTable{}
	var dirs []string
	for _, t := range group {
		by[t.table] = t
		dirs = append(dirs, t.dir)
	}
	cmd := loader.TablesCommand(ctx, opts, dirs)
	var stderr bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sstableloader: %w", err)
	}
	var said []string // the loader's other lines, for an error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			table, ok := strings.CutPrefix(sc.Text(), "loaded ")
			if t, known := by[table]; ok && known {
				say("  loaded %s: %d SSTables from %d node(s), %.1f MiB (%s since the loader started)", table, t.sstables, t.nodes, float64(t.bytes)/(1<<20), since(t0))
				continue
			}
			said = append(said, sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("sstableloader: %w: %s", err, tail(strings.Join(said, "\n")+"\n"+stderr.String(), 8))
	}
	return nil
}

// stagedTable is a table's SSTables from every node, linked into one directory.
type stagedTable struct {
	table, dir      string
	sstables, nodes int
	bytes           int64
}

// stage links every node's SSTables of each table into dst/<table>/ under generations unique
// across the nodes (each node numbers its own from 1), so one sstableloader run per table
// streams them all. Tables without SSTables (empty on every node) are left out.
func stage(dir string, nodes []NodeSnapshot, dst string) ([]stagedTable, error) {
	byTable := map[string]*stagedTable{}
	gens := map[string]int{} // per table: generations given out
	for _, n := range nodes {
		ents, err := os.ReadDir(filepath.Join(dir, n.Addr))
		if err != nil {
			return nil, fmt.Errorf("backup of node %s: %w", n.Addr, err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			table := e.Name()
			files, err := os.ReadDir(filepath.Join(dir, n.Addr, table))
			if err != nil {
				return nil, err
			}
			renamed := map[string]string{} // this node's generation -> the staged one
			counted := false
			for _, f := range files {
				p := sstableName.FindStringSubmatch(f.Name())
				if f.IsDir() || p == nil {
					continue // schema.cql, manifest.json; a secondary index is rebuilt by the target
				}
				gen := p[2]
				if _, err := strconv.Atoi(gen); err == nil {
					if renamed[gen] == "" {
						gens[table]++
						renamed[gen] = strconv.Itoa(gens[table])
					}
					gen = renamed[gen]
				}
				t := byTable[table]
				if t == nil {
					t = &stagedTable{table: table, dir: filepath.Join(dst, table)}
					byTable[table] = t
					if err := os.MkdirAll(t.dir, 0o750); err != nil {
						return nil, err
					}
				}
				if !counted {
					t.nodes++
					counted = true
				}
				src, err := filepath.Abs(filepath.Join(dir, n.Addr, table, f.Name()))
				if err != nil {
					return nil, err
				}
				if err := os.Symlink(src, filepath.Join(t.dir, p[1]+"-"+gen+"-"+p[3]+"-"+p[4])); err != nil {
					return nil, fmt.Errorf("stage %s: %w", src, err)
				}
				if p[4] == "Data.db" {
					t.sstables++
				}
				if info, err := f.Info(); err == nil {
					t.bytes += info.Size()
				}
			}
		}
	}
	out := make([]stagedTable, 0, len(byTable))
	for _, t := range byTable {
		out = append(out, *t)
	}
	// Largest first, so the long streams overlap the short ones.
	sort.Slice(out, func(i, j int) bool { return out[i].bytes > out[j].bytes })
	return out, nil
}

// loaderHosts turns contact points ("host" or "host:port") into sstableloader's -d and -p.
func loaderHosts(hosts []string) (string, string) {
	port := strconv.Itoa(launcher.CQLPort)
	var hs []string
	for _, h := range hosts {
		if host, p, err := net.SplitHostPort(h); err == nil {
			h, port = host, p
		}
		hs = append(hs, h)
	}
	return strings.Join(hs, ","), port
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkCounts compares the loaded rows with the manifest. When writes ran during the backup's
// snapshots (the counts before and after them differ), a table's count may be anywhere
// between the two: which of those writes the snapshots caught depends on each node's moment.
func checkCounts(m backup.Manifest, loaded map[string]int64) error {
	raw := m.Meta[metaCountsAfter]
	if raw == "" {
		return backup.CheckCounts(m, loaded)
	}
	var after map[string]int64
	if err := json.Unmarshal([]byte(raw), &after); err != nil {
		return fmt.Errorf("manifest: %s: %w", metaCountsAfter, err)
	}
	adjusted := maps.Clone(loaded)
	for t, n := range loaded {
		before, ok := m.Counts[t]
		if !ok {
			continue
		}
		if lo, hi := min(before, after[t]), max(before, after[t]); n >= lo && n <= hi {
			adjusted[t] = before
		}
	}
	if err := backup.CheckCounts(m, adjusted); err != nil {
		return fmt.Errorf("%w (counts moved during the backup; each table may hold any count between the two, see the manifest's %s)", err, metaCountsAfter)
	}
	return nil
}
