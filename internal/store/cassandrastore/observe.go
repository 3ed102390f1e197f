package cassandrastore

import (
	"context"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// observer reports each statement's latency to the statement metric, named "<verb>.<table>"
// (a small, fixed set: one per statement shape of the schema).
type observer func(statement string, d time.Duration, err error)

func (o observer) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	o(statementName(q.Statement), q.End.Sub(q.Start), q.Err)
}

func (o observer) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	o("batch", b.End.Sub(b.Start), b.Err)
}

// statementName names a CQL statement by its verb and table: "SELECT ... FROM user_carts" is
// "select.user_carts".
func statementName(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return "unknown"
	}
	verb := strings.ToLower(f[0])
	table := ""
	for i, w := range f {
		switch u := strings.ToUpper(w); {
		case verb == "update" && i == 1, (u == "FROM" || u == "INTO") && i+1 < len(f):
			if verb == "update" {
				table = w
			} else {
				table = f[i+1]
			}
		}
		if table != "" {
			break
		}
	}
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	table = strings.Trim(strings.ToLower(table), `"(;`)
	if table == "" {
		return verb
	}
	return verb + "." + table
}
