package cassandrastore

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
)

// TestBackfillAndProjectorOrder runs the migration's backfill (InsertIfAbsent) beside the
// projector's upserts of one product on the shared node, in every order they can land in,
// including a backfill that lands between a refresh's read of the model and its write (the
// refresh saw no row): the product ends at the projector's state, newer stock included, with
// the search rows of that state only, and the write times order the states.
func TestBackfillAndProjectorOrder(t *testing.T) {
	ctx := context.Background()
	c := store(t).Catalog()
	// backfilled is the state the backfill read; projected the same product after an order
	// took a unit (UpdatedAt unmoved) and, when repriced, a price change too.
	states := func(t *testing.T, repriced bool) (backfilled, projected catalog.Product) {
		backfilled = product(rid("c"), "9.99")
		backfilled.Stock = map[string]int64{"eu": 5}
		projected = backfilled
		projected.Stock = map[string]int64{"eu": 4}
		if repriced {
			projected.Price = money.MustParse("8.99")
			projected.UpdatedAt = backfilled.UpdatedAt.Add(time.Millisecond)
		}
		return backfilled, projected
	}

	t.Run("backfill, then the refresh of a stock change", func(t *testing.T) {
		backfilled, projected := states(t, false)
		if ok, err := c.InsertIfAbsent(ctx, backfilled); err != nil || !ok {
			t.Fatalf("backfill: %v, %v", ok, err)
		}
		bw := checkProductRow(t, c, backfilled)
		if bw != BackfillWriteTime(backfilled) {
			t.Errorf("backfilled at %d, want %d", bw, BackfillWriteTime(backfilled))
		}
		if err := c.UpsertProduct(ctx, projected); err != nil {
			t.Fatal(err)
		}
		if pw := checkProductRow(t, c, projected); pw <= bw {
			t.Errorf("the refresh wrote at %d, not above the backfill's %d", pw, bw)
		}
	})

	for _, repriced := range []bool{false, true} {
		name := "stock change"
		if repriced {
			name = "stock and price change"
		}
		t.Run("refresh of a "+name+", then the backfill of the older state", func(t *testing.T) {
			backfilled, projected := states(t, repriced)
			if err := c.UpsertProduct(ctx, projected); err != nil {
				t.Fatal(err)
			}
			if ok, err := c.InsertIfAbsent(ctx, backfilled); err != nil || ok {
				t.Fatalf("a backfill over a projected product: %v, %v", ok, err)
			}
			checkProductRow(t, c, projected)
		})
	}

	// The interleaving a lightweight transaction lost: the refresh read no row, the backfill's
	// insert landed, then the refresh wrote the newer stock. The backfill runs inside the
	// refresh's version read, as the driver observes it (after the read, before the write).
	t.Run("backfill between the refresh's read and its write", func(t *testing.T) {
		backfilled, projected := states(t, false)
		hosts, ks := ClusterForTest(t)
		cc, p, err := clusterConfig(Config{Hosts: hosts, Keyspace: ks})
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		var inserted bool
		var insertErr error
		cc.QueryObserver = versionReadHook{next: cc.QueryObserver, id: projected.ID, fn: func() {
			once.Do(func() { inserted, insertErr = c.InsertIfAbsent(ctx, backfilled) })
		}}
		s, err := cc.CreateSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := (*Catalog)(&Store{s: s, p: p}).UpsertProduct(ctx, projected); err != nil {
			t.Fatal(err)
		}
		if insertErr != nil || !inserted {
			t.Fatalf("the backfill inside the refresh's read: %v, %v", inserted, insertErr)
		}
		if pw := checkProductRow(t, c, projected); pw <= BackfillWriteTime(backfilled) {
			t.Errorf("the refresh wrote at %d, not above the backfill's %d", pw, BackfillWriteTime(backfilled))
		}
	})

	// Refreshes of one state (a stock change does not move UpdatedAt) never tie: each writes
	// above the one before, so the last read stands even where the stock went up (a cancel).
	t.Run("refreshes of one UpdatedAt", func(t *testing.T) {
		p, _ := states(t, false)
		var last int64
		for i, stock := range []int64{5, 4, 3, 7, 6} {
			p.Stock = map[string]int64{"eu": stock}
			if err := c.UpsertProduct(ctx, p); err != nil {
				t.Fatal(err)
			}
			wt := checkProductRow(t, c, p)
			if wt <= last {
				t.Errorf("refresh %d wrote at %d, not above %d", i, wt, last)
			}
			last = wt
		}
	})
}

// versionReadHook runs fn after each attempt of UpsertProduct's version read of product id.
type versionReadHook struct {
	next gocql.QueryObserver
	id   string
	fn   func()
}

func (h versionReadHook) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	h.next.ObserveQuery(ctx, q)
	if q.Statement == productVersion && len(q.Values) == 1 && q.Values[0] == h.id {
		h.fn()
	}
}

// checkProductRow fails t unless the model holds exactly want (read at the catalog's level),
// with the search rows of want alone; it returns the row's write time.
func checkProductRow(t *testing.T, c *Catalog, want catalog.Product) int64 {
	t.Helper()
	ctx := context.Background()
	got, err := c.GetProduct(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock["eu"] != want.Stock["eu"] || got.Price != want.Price || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("%s holds stock %v, price %s, updated %s; want %v, %s, %s", want.ID, got.Stock, got.Price, got.UpdatedAt,
			want.Stock, want.Price, want.UpdatedAt)
	}
	var search []string
	if err := SearchScan(ctx, c.s, func(id string, r SearchRow) {
		if id == want.ID {
			search = append(search, r.String())
		}
	}); err != nil {
		t.Fatal(err)
	}
	var wantSearch []string
	for _, r := range SearchRows(want) {
		wantSearch = append(wantSearch, r.String())
	}
	slices.Sort(search)
	slices.Sort(wantSearch)
	if !slices.Equal(search, wantSearch) {
		t.Errorf("%s search rows %v, want %v", want.ID, search, wantSearch)
	}
	wt, err := c.productWriteTime(ctx, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	return wt
}
