package cassandrastore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/session"
)

//go:embed schema/*.cql
var schemaFS embed.FS

//go:embed baseline/*.cql
var baselineFS embed.FS

// SchemaOptions are what `shardmart cassandra schema apply` configures.
type SchemaOptions struct {
	Keyspace string // default DefaultKeyspace
	// RF is the replication factor in Datacenter: 1 on one node, 3 on the local cluster.
	RF         int
	Datacenter string // default "datacenter1" (the launcher's and SimpleSnitch's name)
	// Replication, when set, is the replication factor per data centre (dc1:3,dc2:3) and
	// replaces RF and Datacenter.
	Replication map[string]int
	SessionTTL  time.Duration // sessions' and guest carts' default TTL, default session.DefaultTTL
	// Conn is the login and TLS of the session that applies the schema (its local DC, if any,
	// only routes the DDL).
	Conn Connection
	// upgradesOnly applies every upgrade one by one even to an empty keyspace: the path a
	// keyspace created before the baseline took, which the baseline's test compares with.
	upgradesOnly bool
}

// ParseReplication reads "dc1:3,dc2:3" (replication factor per data centre).
func ParseReplication(s string) (map[string]int, error) {
	m := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		dc, n, ok := strings.Cut(part, ":")
		rf, err := strconv.Atoi(strings.TrimSpace(n))
		dc = strings.TrimSpace(dc)
		if !ok || err != nil || !validReplicas(dc, rf) {
			return nil, fmt.Errorf("replication %q: want datacentre:factor pairs such as dc1:3,dc2:3 (factor 1 to 9)", part)
		}
		if _, dup := m[dc]; dup {
			return nil, fmt.Errorf("replication %q: data centre %s given twice", s, dc)
		}
		m[dc] = rf
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("replication %q: no data centre", s)
	}
	return m, nil
}

var (
	keyspaceName   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	datacentreName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,48}$`)
)

// validReplicas tells a data centre name and a replication factor fit to go into CQL.
func validReplicas(dc string, rf int) bool {
	return datacentreName.MatchString(dc) && rf >= 1 && rf <= 9
}

func (o *SchemaOptions) defaults() error {
	if o.Keyspace == "" {
		o.Keyspace = DefaultKeyspace
	}
	if !keyspaceName.MatchString(o.Keyspace) {
		return fmt.Errorf("keyspace %q: want lower-case letters, digits and _ (up to 48)", o.Keyspace)
	}
	if o.RF == 0 {
		o.RF = 1
	}
	if o.RF < 1 || o.RF > 9 {
		return fmt.Errorf("replication factor %d: want 1 to 9", o.RF)
	}
	if o.Datacenter == "" {
		o.Datacenter = "datacenter1"
	}
	if len(o.Replication) == 0 {
		o.Replication = map[string]int{o.Datacenter: o.RF}
	}
	for dc, rf := range o.Replication {
		if !validReplicas(dc, rf) {
			return fmt.Errorf("replication %s:%d: want a data centre name and a factor 1 to 9", dc, rf)
		}
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = session.DefaultTTL
	}
	if o.SessionTTL < time.Second || o.SessionTTL.Seconds() > maxTTL {
		return fmt.Errorf("session TTL %s: want 1s to 20 years", o.SessionTTL)
	}
	return nil
}

// SchemaResult says what an apply changed; a second apply of the same options changes nothing.
type SchemaResult struct {
	KeyspaceCreated bool
	Altered         []string // keyspace replication or table TTLs changed to match the options
	Applied         []int    // schema upgrade versions applied by this run
	Version         int      // schema version after the run
	// Baseline is the version an empty keyspace was brought to in one pass (baseline/), 0 if
	// none was run.
	Baseline int
}

// upgrade is one embedded schema/NNNN_name.cql file: a schema version.
type upgrade struct {
	version  int
	name     string
	text     string // template
	checksum string
}

var upgradeFileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.cql$`)

func upgrades() ([]upgrade, error) {
	entries, err := fs.ReadDir(schemaFS, "schema")
	if err != nil {
		return nil, err
	}
	var ms []upgrade
	for _, e := range entries {
		m := upgradeFileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("schema/%s: want NNNN_name.cql", e.Name())
		}
		b, err := schemaFS.ReadFile("schema/" + e.Name())
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		ms = append(ms, upgrade{version: v, name: m[2], text: string(b), checksum: statementsChecksum(string(b))})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// baselineMarker is the schema_migrations row written before a baseline's statements: a run
// interrupted half-way finds it and runs the same baseline again, instead of upgrades whose
// ALTERs would meet the baseline's final columns.
const baselineMarker = 0

// newestBaseline is the highest baseline/NNNN_baseline.cql: upgrades 1 to NNNN as one set of
// statements that create each table in its final shape (fewer schema changes, each of which
// waits for every node to agree).
func newestBaseline() (upgrade, error) {
	entries, err := fs.ReadDir(baselineFS, "baseline")
	if err != nil {
		return upgrade{}, err
	}
	var b upgrade
	for _, e := range entries {
		m := upgradeFileName.FindStringSubmatch(e.Name())
		if m == nil {
			return upgrade{}, fmt.Errorf("baseline/%s: want NNNN_name.cql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if v < b.version {
			continue
		}
		text, err := baselineFS.ReadFile("baseline/" + e.Name())
		if err != nil {
			return upgrade{}, err
		}
		b = upgrade{version: v, name: m[2], text: string(text), checksum: statementsChecksum(string(text))}
	}
	return b, nil
}

// statementsChecksum is what schema_migrations records for an upgrade: a sum over its template
// without comments or trailing blanks, so that rewording a comment leaves an applied keyspace
// verifiable while any edit to a statement is refused.
func statementsChecksum(text string) string {
	sum := sha256.Sum256([]byte(withoutComments(text)))
	return hex.EncodeToString(sum[:8])
}

// fileChecksums are the sums keyspaces recorded before comments were left out of them: the sum
// of each file's bytes as it last was then, with the statements' sum of that same file. Such a
// keyspace verifies while the upgrade's statements are still those.
var fileChecksums = map[int]struct{ file, statements string }{
	1: {"167a8707f3f516f2", "79d52c0ef55717f5"},
	2: {"00cb74881d535cf5", "719ce6a38d8903a0"},
	3: {"df29593d504ddaf6", "92ceaa4fb4c7a716"},
	4: {"8f0a8914470bdd19", "9c372aa44a31ad52"},
	5: {"7e2666e499c4bafa", "33e7b4878e288dfa"},
}

// verify refuses an upgrade whose statements differ from those recorded as applied.
func (m upgrade) verify(recorded string) error {
	if recorded == m.checksum {
		return nil
	}
	if f, ok := fileChecksums[m.version]; ok && recorded == f.file && m.checksum == f.statements {
		return nil
	}
	return fmt.Errorf("cassandra schema: upgrade %04d_%s was edited after it was applied (checksum %s, recorded %s): add a new upgrade file instead", m.version, m.name, m.checksum, recorded)
}

// withoutComments drops "--" comments, trailing blanks and empty lines.
func withoutComments(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimRight(l, " \t\r"); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// LatestVersion is the highest embedded schema version.
func LatestVersion() int {
	ms, err := upgrades()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// statements renders an upgrade and splits it into statements (comments dropped).
func (m upgrade) statements(o SchemaOptions) ([]string, error) {
	t, err := template.New(m.name).Option("missingkey=error").Parse(m.text)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, map[string]any{"KS": o.Keyspace, "SessionTTL": int(o.SessionTTL.Seconds())}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range strings.Split(withoutComments(buf.String()), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// ApplySchema brings the cluster at hosts to the embedded schema: it creates the keyspace
// (NetworkTopologyStrategy, opts.RF replicas in opts.Datacenter) or alters its replication,
// applies every schema upgrade not yet recorded in <keyspace>.schema_migrations (a table name
// kept from earlier releases, since existing keyspaces hold it; a keyspace with no table yet
// gets the upgrades the baseline covers in one pass, with fewer statements), and aligns the
// TTL settings, waiting for schema agreement after every change. Running it again with the
// same options changes nothing. Run one apply at a time: concurrent CREATE TABLEs on
// different coordinators can disagree.
func ApplySchema(ctx context.Context, hosts []string, opts SchemaOptions) (SchemaResult, error) {
	if err := opts.defaults(); err != nil {
		return SchemaResult{}, err
	}
	// A schema change waits for the coordinator to apply it, seconds on a loaded machine: far
	// above the shop's attempt timeout, and DDL is never retried.
	conf := Config{Hosts: hosts, Timeout: 30 * time.Second, Connection: opts.Conn}
	cfg, err := ClusterConfig(conf)
	if err != nil {
		return SchemaResult{}, err
	}
	cfg.Keyspace = ""
	cfg.MaxWaitSchemaAgreement = 2 * time.Minute
	s, err := openChecked(ctx, conf, cfg)
	if err != nil {
		return SchemaResult{}, err
	}
	defer s.Close()
	return applySchema(ctx, s, opts)
}

func applySchema(ctx context.Context, s *gocql.Session, o SchemaOptions) (SchemaResult, error) {
	var res SchemaResult
	ddl := func(stmt string) error {
		if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("cassandra schema: %s: %w", firstLine(stmt), err)
		}
		if err := s.AwaitSchemaAgreement(ctx); err != nil {
			return fmt.Errorf("cassandra schema: waiting for schema agreement after %s: %w", firstLine(stmt), err)
		}
		return nil
	}
	if err := applyKeyspace(ctx, s, o, ddl, &res); err != nil {
		return res, err
	}
	if err := ddl(fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.schema_migrations (
		version int PRIMARY KEY, name text, checksum text, applied_at timestamp)`, o.Keyspace)); err != nil {
		return res, err
	}
	record := func(m upgrade) error {
		err := s.Query(fmt.Sprintf(`INSERT INTO %s.schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)`, o.Keyspace),
			m.version, m.name, m.checksum, time.Now().UTC()).WithContext(ctx).Exec()
		if err != nil {
			return fmt.Errorf("cassandra schema: record version %d: %w", m.version, err)
		}
		return nil
	}
	applied, err := appliedVersions(ctx, s, o.Keyspace)
	if err != nil {
		return res, err
	}
	ms, err := upgrades()
	if err != nil {
		return res, err
	}
	if err := applyBaseline(ctx, s, o, ms, applied, ddl, record, &res); err != nil {
		return res, err
	}
	if err := applyUpgrades(o, ms, applied, ddl, record, &res); err != nil {
		return res, err
	}
	if err := alignSessionTTL(ctx, s, o, ddl, &res); err != nil {
		return res, err
	}
	return res, nil
}

// applyKeyspace creates the keyspace, or brings its replication to the options (an RF
// increase needs a full repair afterwards to populate the new replicas: `shardmart cassandra
// repair`).
func applyKeyspace(ctx context.Context, s *gocql.Session, o SchemaOptions, ddl func(string) error, res *SchemaResult) error {
	replication := replicationCQL(o.Replication)
	var current map[string]string
	err := s.Query(`SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?`, o.Keyspace).
		WithContext(ctx).Consistency(gocql.One).Scan(&current)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		if err := ddl(fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s AND durable_writes = true", o.Keyspace, replication)); err != nil {
			return err
		}
		res.KeyspaceCreated = true
	case err != nil:
		return fmt.Errorf("cassandra schema: read keyspace %s: %w", o.Keyspace, err)
	default:
		if !sameReplication(current, o.Replication) {
			if err := ddl(fmt.Sprintf("ALTER KEYSPACE %s WITH replication = %s", o.Keyspace, replication)); err != nil {
				return err
			}
			res.Altered = append(res.Altered, fmt.Sprintf("keyspace %s replication %v -> %s", o.Keyspace, current, replication))
		}
	}
	return nil
}

// appliedVersions is the checksum of every upgrade recorded in keyspace.schema_migrations, by
// version.
func appliedVersions(ctx context.Context, s *gocql.Session, keyspace string) (map[int]string, error) {
	applied := map[int]string{}
	iter := s.Query(fmt.Sprintf(`SELECT version, checksum FROM %s.schema_migrations`, keyspace)).WithContext(ctx).Iter()
	var v int
	var sum string
	for iter.Scan(&v, &sum) {
		applied[v] = sum
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("cassandra schema: read applied versions: %w", err)
	}
	return applied, nil
}

// applyUpgrades runs, in order, every upgrade of ms not in applied and records it; an applied
// one must still match its recorded checksum.
func applyUpgrades(o SchemaOptions, ms []upgrade, applied map[int]string, ddl func(string) error, record func(upgrade) error, res *SchemaResult) error {
	for _, m := range ms {
		if sum, ok := applied[m.version]; ok {
			if err := m.verify(sum); err != nil {
				return err
			}
			res.Version = m.version
			continue
		}
		stmts, err := m.statements(o)
		if err != nil {
			return fmt.Errorf("cassandra schema: render %04d_%s: %w", m.version, m.name, err)
		}
		for _, st := range stmts {
			if err := ddl(st); err != nil {
				return err
			}
		}
		if err := record(m); err != nil {
			return err
		}
		res.Applied = append(res.Applied, m.version)
		res.Version = m.version
	}
	return nil
}

// alignSessionTTL sets the default TTL of the session-bound tables to the options: a setting
// that follows the options rather than a version.
func alignSessionTTL(ctx context.Context, s *gocql.Session, o SchemaOptions, ddl func(string) error, res *SchemaResult) error {
	ttl := int(o.SessionTTL.Seconds())
	for _, table := range []string{"sessions", "guest_carts"} {
		var cur int
		err := s.Query(`SELECT default_time_to_live FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, o.Keyspace, table).
			WithContext(ctx).Consistency(gocql.One).Scan(&cur)
		if err != nil {
			return fmt.Errorf("cassandra schema: read %s options: %w", table, err)
		}
		if cur != ttl {
			if err := ddl(fmt.Sprintf("ALTER TABLE %s.%s WITH default_time_to_live = %d", o.Keyspace, table, ttl)); err != nil {
				return err
			}
			res.Altered = append(res.Altered, fmt.Sprintf("%s default_time_to_live %d -> %d", table, cur, ttl))
		}
	}
	return nil
}

// applyBaseline brings a keyspace that holds no table but schema_migrations (or one whose
// baseline run was interrupted) to the newest baseline's version in one pass, and records the
// upgrades it stands for as applied (in applied too, for the upgrade loop that follows). Any
// other keyspace is left to the upgrades: a table created by an earlier upgrade keeps its
// shape under CREATE IF NOT EXISTS, so only the ALTERs after it can bring it up to date.
func applyBaseline(ctx context.Context, s *gocql.Session, o SchemaOptions, ms []upgrade, applied map[int]string,
	ddl func(string) error, record func(upgrade) error, res *SchemaResult) error {
	begun, interrupted := applied[baselineMarker]
	delete(applied, baselineMarker)
	if o.upgradesOnly || len(applied) > 0 {
		return nil
	}
	b, err := newestBaseline()
	if err != nil || b.version == 0 {
		return err
	}
	if interrupted && begun != b.checksum {
		return fmt.Errorf("cassandra schema: keyspace %s holds a half-applied baseline other than %04d_%s (checksum %s, recorded %s): drop the keyspace and apply again",
			o.Keyspace, b.version, b.name, b.checksum, begun)
	}
	if !interrupted {
		var tables []string
		iter := s.Query(`SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?`, o.Keyspace).WithContext(ctx).Consistency(gocql.One).Iter()
		var name string
		for iter.Scan(&name) {
			if name != "schema_migrations" {
				tables = append(tables, name)
			}
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("cassandra schema: list tables of %s: %w", o.Keyspace, err)
		}
		var types int
		if err := s.Query(`SELECT count(*) FROM system_schema.types WHERE keyspace_name = ?`, o.Keyspace).
			WithContext(ctx).Consistency(gocql.One).Scan(&types); err != nil {
			return fmt.Errorf("cassandra schema: list types of %s: %w", o.Keyspace, err)
		}
		if len(tables) > 0 || types > 0 {
			return nil
		}
	}
	if err := record(upgrade{version: baselineMarker, name: fmt.Sprintf("baseline_%04d", b.version), checksum: b.checksum}); err != nil {
		return err
	}
	stmts, err := b.statements(o)
	if err != nil {
		return fmt.Errorf("cassandra schema: render baseline %04d_%s: %w", b.version, b.name, err)
	}
	for _, st := range stmts {
		if err := ddl(st); err != nil {
			return err
		}
	}
	for _, m := range ms {
		if m.version > b.version {
			break
		}
		if err := record(m); err != nil {
			return err
		}
		applied[m.version] = m.checksum
		res.Applied = append(res.Applied, m.version)
	}
	res.Baseline = b.version
	return nil
}

// replicationCQL is the NetworkTopologyStrategy map of rf, data centres sorted.
func replicationCQL(rf map[string]int) string {
	dcs := make([]string, 0, len(rf))
	for dc := range rf {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs)
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for _, dc := range dcs {
		fmt.Fprintf(&b, ", '%s': %d", dc, rf[dc])
	}
	b.WriteString("}")
	return b.String()
}

// sameReplication tells whether the keyspace's replication is NetworkTopologyStrategy with
// exactly rf.
func sameReplication(current map[string]string, rf map[string]int) bool {
	if !strings.HasSuffix(current["class"], "NetworkTopologyStrategy") || len(current) != len(rf)+1 {
		return false
	}
	for dc, n := range rf {
		if current[dc] != strconv.Itoa(n) {
			return false
		}
	}
	return true
}

func firstLine(stmt string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(stmt), "\n")
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), "("))
}
