package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// Conn locates a cluster: contact points and the login/TLS (cassandrastore.Connection).
type Conn struct {
	Hosts []string
	cassandrastore.Connection
}

// open opens a session outside any keyspace, with attempts long enough for a full scan's pages.
func (c Conn) open(ctx context.Context) (*gocql.Session, error) {
	if len(c.Hosts) == 0 {
		return nil, errors.New("no Cassandra contact point")
	}
	return cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts, Keyspace: "-", Connection: c.Connection, Timeout: time.Minute})
}

// ringNode is one member of the ring as the driver sees it.
type ringNode struct {
	Addr   string   `json:"addr"`
	DC     string   `json:"dc"`
	Tokens []string `json:"tokens"`
}

// ring lists the cluster's nodes, sorted by address.
func ring(s *gocql.Session) []ringNode {
	var out []ringNode
	for _, h := range s.GetHosts() {
		out = append(out, ringNode{Addr: h.ConnectAddress().String(), DC: h.DataCenter(), Tokens: h.Tokens()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// tables lists the keyspace's tables, sorted; a keyspace that does not exist has none.
func tables(ctx context.Context, s *gocql.Session, keyspace string) ([]string, error) {
	var names []string
	iter := s.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", keyspace).WithContext(ctx).Iter()
	var name string
	for iter.Scan(&name) {
		names = append(names, name)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", keyspace, err)
	}
	sort.Strings(names)
	return names, nil
}

// countRows counts every table's CQL rows at ALL: each replica answers, so a row any replica
// holds is counted, as a restore from every node's snapshot loads it. The scan reads the
// partition key only, a page at a time, so no single request has to cover a large table.
func countRows(ctx context.Context, s *gocql.Session, keyspace string, names []string) (map[string]int64, error) {
	counts := map[string]int64{}
	for _, t := range names {
		pk, err := partitionKey(ctx, s, keyspace, t)
		if err != nil {
			return nil, err
		}
		iter := s.Query(fmt.Sprintf("SELECT %s FROM %s.%s", pk, quoteIdent(keyspace), quoteIdent(t))).
			WithContext(ctx).Consistency(gocql.All).PageSize(5000).Idempotent(true).Iter()
		var n int64
		sc := iter.Scanner()
		for sc.Next() {
			n++
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("count %s.%s at ALL (every replica must answer): %w", keyspace, t, err)
		}
		counts[t] = n
	}
	return counts, nil
}

// partitionKey is the table's first partition key column, quoted for CQL.
func partitionKey(ctx context.Context, s *gocql.Session, keyspace, table string) (string, error) {
	iter := s.Query("SELECT column_name, kind, position FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?", keyspace, table).
		WithContext(ctx).Iter()
	var col, kind string
	var pos int
	found := ""
	for iter.Scan(&col, &kind, &pos) {
		if kind == "partition_key" && pos == 0 {
			found = col
		}
	}
	if err := iter.Close(); err != nil {
		return "", fmt.Errorf("read the columns of %s.%s: %w", keyspace, table, err)
	}
	if found == "" {
		return "", fmt.Errorf("%s.%s: no partition key column in system_schema.columns", keyspace, table)
	}
	return quoteIdent(found), nil
}

// quoteIdent quotes a CQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// describe is the keyspace's schema as CQL statements (DESCRIBE KEYSPACE, run by the server):
// the keyspace, its types, tables, indexes and views, in an order they can be created in.
func describe(ctx context.Context, s *gocql.Session, keyspace string) ([]string, error) {
	iter := s.Query("DESCRIBE KEYSPACE " + quoteIdent(keyspace)).WithContext(ctx).Iter()
	var ks, typ, name, stmt string
	var out []string
	for iter.Scan(&ks, &typ, &name, &stmt) {
		out = append(out, strings.TrimSpace(stmt))
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("describe keyspace %s: %w", keyspace, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("describe keyspace %s: no schema (does the keyspace exist?)", keyspace)
	}
	return out, nil
}

// splitStatements splits CQL text into statements at semicolons outside quotes.
func splitStatements(text string) []string {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range text {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ';':
			if st := strings.TrimSpace(cur.String()); st != "" {
				out = append(out, st)
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if st := strings.TrimSpace(cur.String()); st != "" {
		out = append(out, st)
	}
	return out
}
