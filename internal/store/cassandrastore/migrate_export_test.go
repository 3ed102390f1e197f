package cassandrastore

import (
	"context"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
)

// TestInsertIfAbsentOutcomes runs InsertIfAbsent's rounds on the shared node, each proposal
// going through propose (the real statement, or not, and then the answer a loaded coordinator
// gives): an unknown outcome is settled by the row read back at SERIAL, never reported as an
// error, and a row another writer put first is left alone.
func TestInsertIfAbsentOutcomes(t *testing.T) {
	s := store(t).Session()
	c := NewCatalog(s)
	ctx := context.Background()
	timeout := gocql.ErrTimeoutNoResponse
	run := func(q *gocql.Query) (bool, error) { return q.MapScanCASContext(ctx, map[string]any{}) }
	for _, tc := range []struct {
		name string
		// propose stands for the coordinator on proposal n (0 first) of the insert q of p.
		propose   func(n int, p catalog.Product, q *gocql.Query) (bool, error)
		before    bool // the row is there before the call
		want      bool
		proposals int
		other     bool // the row ends holding the other writer's product
	}{
		{name: "applied at once", propose: func(_ int, _ catalog.Product, q *gocql.Query) (bool, error) { return run(q) },
			want: true, proposals: 1},
		{name: "timed out but landed: applied, not proposed again",
			propose: func(_ int, _ catalog.Product, q *gocql.Query) (bool, error) {
				if _, err := run(q); err != nil {
					return false, err
				}
				return false, timeout
			}, want: true, proposals: 1},
		{name: "timed out before it ran: proposed again",
			propose: func(n int, _ catalog.Product, q *gocql.Query) (bool, error) {
				if n == 0 {
					return false, timeout
				}
				return run(q)
			}, want: true, proposals: 2},
		{name: "timed out while another writer's row landed: not applied",
			propose: func(_ int, p catalog.Product, _ *gocql.Query) (bool, error) {
				if _, err := run(s.Query(`INSERT INTO products (`+productCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`,
					productRow(otherWriter(p))...).SerialConsistency(cas1.Serial)); err != nil {
					return false, err
				}
				return false, timeout
			}, want: false, proposals: 1, other: true},
		{name: "already there: refused, not applied", before: true, want: false, proposals: 1, other: true,
			propose: func(_ int, _ catalog.Product, q *gocql.Query) (bool, error) { return run(q) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := product("insert-if-absent", "9.99")
			if tc.before {
				if applied, err := c.InsertIfAbsent(ctx, otherWriter(p)); err != nil || !applied {
					t.Fatalf("insert the other writer's row: %v, %v", applied, err)
				}
			}
			proposals := 0
			round := c.insertRound(p, productRow(p))
			got, err := casLoop(ctx, nil, "test", func(ctx context.Context, a casAttempt) (bool, *casOp[bool], error) {
				v, op, err := round(ctx, a)
				if op != nil {
					q := op.query
					op.exec = func(context.Context) (bool, error) {
						proposals++
						return tc.propose(proposals-1, p, q)
					}
				}
				return v, op, err
			})
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v, nil", got, err, tc.want)
			}
			if proposals != tc.proposals {
				t.Errorf("%d proposals, want %d", proposals, tc.proposals)
			}
			row, err := c.GetProduct(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := p
			if tc.other {
				want = otherWriter(p)
			}
			if !sameProductRow(row, want) {
				t.Errorf("row holds %+v, want %+v", row, want)
			}
		})
	}
}

// otherWriter is p as another writer (the projector) has it: same id, another state.
func otherWriter(p catalog.Product) catalog.Product {
	p.Name += " (projected)"
	p.Stock = map[string]int64{"eu": 2}
	return p
}
