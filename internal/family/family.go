// Package family declares shardmart's data families once: each family's name, the backends
// that can hold it, whether `shardmart migrate` moves it to Cassandra and in which order, and
// the copy rate a migration plan assumes. The placement, the dual-write layer, the migration
// engine and the CLI derive their lists from Specs, so a new family is one entry here plus its
// store adapters (and, if it migrates, its migration codec in internal/migrate, which a test
// holds equal to this list).
package family

import (
	"fmt"
	"strings"
)

// Name names a family, as placements ("carts=cassandra") and the migrate CLI spell it.
type Name string

// The families.
const (
	// Orders is the transactional family: orders, products with stock, the outbox, users and
	// idempotency keys. It needs multi-row transactions, so only the embedded store or MongoDB
	// can hold it.
	Orders   Name = "orders"
	Carts    Name = "carts"
	Sessions Name = "sessions"
	Events   Name = "events"
	History  Name = "history"
	// Catalog is the product read model for search and product pages. On the transactional
	// backend it is the products table itself; elsewhere the projector feeds it.
	Catalog Name = "catalog"
)

// Backend names.
const (
	SQLite    = "sqlite"
	Cassandra = "cassandra"
	Mongo     = "mongo"
)

// Spec is everything shardmart knows about a family outside its store adapters.
type Spec struct {
	Name Name
	// Backends can hold the family.
	Backends []string
	// MigrationOrder is the family's place in a full migration to Cassandra (1 first); 0:
	// the family does not move there.
	MigrationOrder int
	// CopyRate is the rows per second a migration plan assumes for the family: the backfill's
	// medians into one Cassandra node with 4 workers (docs/evidence/benchmarks.md), rounded down.
	CopyRate float64
	// MongoCopyRate is the rows per second a plan of a dual-write migration into MongoDB
	// assumes: the lowest backfill rate measured into a 3-member replica set with 8 workers
	// (docs/migration.md); 0: the family does not move to MongoDB with dual writes.
	MongoCopyRate float64
}

// Specs lists every family in the order placements print them.
var Specs = []Spec{
	{Name: Orders, Backends: []string{SQLite, Mongo}},
	{Name: Carts, Backends: []string{SQLite, Mongo, Cassandra}, MigrationOrder: 2, CopyRate: 7_000, MongoCopyRate: 1_850},
	{Name: Sessions, Backends: []string{SQLite, Mongo, Cassandra}, MigrationOrder: 1, CopyRate: 10_000, MongoCopyRate: 2_300},
	{Name: Events, Backends: []string{SQLite, Mongo, Cassandra}, MigrationOrder: 4, CopyRate: 17_000, MongoCopyRate: 5_400},
	{Name: History, Backends: []string{SQLite, Mongo, Cassandra}, MigrationOrder: 3, CopyRate: 11_000, MongoCopyRate: 1_200},
	{Name: Catalog, Backends: []string{SQLite, Mongo, Cassandra}, MigrationOrder: 5, CopyRate: 3_000},
}

// All names every family, in Specs' order.
func All() []Name {
	out := make([]Name, len(Specs))
	for i, s := range Specs {
		out[i] = s.Name
	}
	return out
}

// ToCassandra names the families `shardmart migrate` moves to Cassandra, in migration order.
func ToCassandra() []Name {
	out := make([]Name, 0, len(Specs))
	for order := 1; order <= len(Specs); order++ {
		for _, s := range Specs {
			if s.MigrationOrder == order {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// ToMongoDualWrite names the families `shardmart migrate --to mongo` moves with dual writes,
// in migration order.
func ToMongoDualWrite() []Name {
	var out []Name
	for _, n := range ToCassandra() {
		if s, _ := Get(n); s.MongoCopyRate > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Get returns n's spec.
func Get(n Name) (Spec, bool) {
	for _, s := range Specs {
		if s.Name == n {
			return s, true
		}
	}
	return Spec{}, false
}

// Holds reports whether backend can hold the family.
func (s Spec) Holds(backend string) bool {
	for _, b := range s.Backends {
		if b == backend {
			return true
		}
	}
	return false
}

// Join renders names as "a, b, c", for messages.
func Join(names []Name) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	return strings.Join(parts, ", ")
}

// ParseMigratable accepts the name of a family `shardmart migrate` moves.
func ParseMigratable(s string) (Name, error) {
	n := Name(s)
	if spec, ok := Get(n); ok && spec.MigrationOrder > 0 {
		return n, nil
	}
	return "", fmt.Errorf("family %q: want one of %s", s, Join(ToCassandra()))
}
