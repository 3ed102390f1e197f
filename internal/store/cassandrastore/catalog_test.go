package cassandrastore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

func rid(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

var catalogBase = time.Now().UTC().Truncate(time.Millisecond)

func product(category, price string) catalog.Product {
	return catalog.Product{ID: rid("p"), Name: "Widget " + price, Category: category, Price: money.MustParse(price),
		Attributes: map[string]string{"color": "red"}, Stock: map[string]int64{"eu": 3},
		CreatedAt: catalogBase, UpdatedAt: catalogBase}
}

// TestCatalogReadModelBuckets is what only this read model has: a category spread over
// CategoryBuckets partitions (the shared cases run in TestContract, storetest.CatalogReadModel).
func TestCatalogReadModelBuckets(t *testing.T) {
	c := store(t).Catalog()
	ctx := context.Background()
	t.Run("many products merge across all buckets in price order", func(t *testing.T) {
		t.Parallel()
		cat := rid("c")
		const n = 60
		for i := 0; i < n; i++ {
			p := product(cat, fmt.Sprintf("%d.%02d", 1+i%17, i%100))
			// The first products take one bucket each, so every bucket is merged (random ids
			// alone leave one of 8 buckets empty in about 1 run of 400).
			for i < CategoryBuckets && bucketOfProduct(p.ID) != i {
				p.ID = rid("p")
			}
			if err := c.UpsertProduct(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		got := storetest.SearchAll(t, c, catalog.Search{Category: cat, Page: paging.Request{Limit: 7}})
		buckets := map[int]bool{}
		seen := map[string]bool{}
		for i, p := range got {
			buckets[bucketOfProduct(p.ID)] = true
			if seen[p.ID] {
				t.Errorf("%s returned twice", p.ID)
			}
			seen[p.ID] = true
			if i > 0 && less(p, got[i-1]) {
				t.Errorf("item %d (%s %s) sorts before item %d (%s %s)", i, p.Price, p.ID, i-1, got[i-1].Price, got[i-1].ID)
			}
		}
		if len(got) != n || len(buckets) != CategoryBuckets {
			t.Errorf("got %d products from %d buckets, want %d from %d", len(got), len(buckets), n, CategoryBuckets)
		}
	})
	// The embedded store and the outbox carry CreatedAt in nanoseconds, Cassandra keeps
	// milliseconds: a change must not read that as a new created_at, or it deletes and
	// rewrites the newest-first row at one timestamp, and the delete wins the tie.
	t.Run("a change keeps a nanosecond-created product in the newest listing", func(t *testing.T) {
		t.Parallel()
		p := product(rid("c"), "5.00")
		p.CreatedAt = catalogBase.Add(123456 * time.Nanosecond)
		p.UpdatedAt = p.CreatedAt
		if err := c.UpsertProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Price, p.UpdatedAt = money.MustParse("6.00"), p.UpdatedAt.Add(time.Second)
		if err := c.UpsertProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		for _, sort := range []catalog.Sort{catalog.SortPrice, catalog.SortNewest} {
			got := storetest.SearchAll(t, c, catalog.Search{Category: p.Category, Sort: sort, Page: paging.Request{Limit: 10}})
			if len(got) != 1 || got[0].Price != p.Price {
				t.Errorf("sort %s after a price change: %+v, want the product at %s", sort, got, p.Price)
			}
		}
	})
}

func TestSchemaApplyIsIdempotent(t *testing.T) {
	store(t)
	ctx := context.Background()
	res, err := ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: testKeyspace, RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.KeyspaceCreated || len(res.Altered) != 0 || len(res.Applied) != 0 || res.Version != LatestVersion() {
		t.Errorf("second apply changed something: %+v", res)
	}
	var readRepair string
	var ttl int
	err = testStore.Session().Query(`SELECT read_repair, default_time_to_live FROM system_schema.tables WHERE keyspace_name = ? AND table_name = 'guest_carts'`, testKeyspace).Scan(&readRepair, &ttl)
	if err != nil || readRepair != "BLOCKING" || ttl != int((7*24*time.Hour).Seconds()) {
		t.Errorf("guest_carts options: read_repair %q ttl %d, %v", readRepair, ttl, err)
	}
}

// TestCatalogUpsertOutlivesItsCaller: an upsert whose caller has given up (a projector drain cut
// by its deadline) still completes before it returns, so it cannot be left in flight to race the
// next drain's upsert of the same product.
func TestCatalogUpsertOutlivesItsCaller(t *testing.T) {
	c := store(t).Catalog()
	p := product(rid("c"), "4.00")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.UpsertProduct(ctx, p); err != nil {
		t.Fatalf("upsert with a cancelled caller: %v", err)
	}
	got, err := c.GetProduct(context.Background(), p.ID)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if got.Stock["eu"] != 3 || got.Price != p.Price {
		t.Errorf("read back %+v, want the upserted product", got)
	}
}
