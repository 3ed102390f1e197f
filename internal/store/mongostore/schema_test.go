package mongostore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// freshDB is an empty database on the test server, dropped at the end.
func freshDB(t *testing.T) (*mongo.Client, string) {
	t.Helper()
	if testSetupErr != nil {
		t.Fatal(testSetupErr)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(testURI))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("schema_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = c.Database(name).Drop(context.Background())
		_ = c.Disconnect(context.Background())
	})
	return c, name
}

// An index that exists with the same key under another name, or under the same name with
// another key, made Open fail (createIndexes refuses both) and stopped the service. Open now
// starts, leaves both as they are, and reports them; indexes of a collection that holds
// documents are reported missing, not built at start-up.
func TestOpenReportsForeignIndexesInsteadOfFailing(t *testing.T) {
	c, db := freshDB(t)
	ctx := context.Background()
	products := c.Database(db).Collection(collProducts)
	if _, err := products.InsertOne(ctx, d(e("_id", "p1"), e("category", "c"), e("price", int64(100)))); err != nil {
		t.Fatal(err)
	}
	if _, err := products.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: d(e("category", 1), e("price", 1), e("_id", 1)),
		Options: options.Index().SetName("by_category_and_price")}); err != nil {
		t.Fatal(err)
	}
	events := c.Database(db).Collection(collEvents)
	if _, err := events.InsertOne(ctx, d(e("user_id", "u:1"), e("type", "view"))); err != nil {
		t.Fatal(err)
	}
	if _, err := events.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: d(e("user_id", 1)),
		Options: options.Index().SetName("user_newest")}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{URI: testURI, Database: db})
	if err != nil {
		t.Fatalf("Open with foreign indexes: %v", err)
	}
	defer s.Close()
	rep, err := s.EnsureSchema(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(rep.Conflicts, "\n")
	for _, want := range []string{`products.category_price_id: the key {category:1, price:1, _id:1} is already indexed as "by_category_and_price"`,
		"events.user_newest exists as {user_id:1}"} {
		if !strings.Contains(joined, want) {
			t.Errorf("conflicts %q lack %q", rep.Conflicts, want)
		}
	}
	if !slices.ContainsFunc(rep.Missing, func(m string) bool { return strings.HasPrefix(m, "events.actor_newest ") }) {
		t.Errorf("missing %q: want events.actor_newest reported (the collection holds a document)", rep.Missing)
	}
	if names := indexNames(t, products); slices.Contains(names, "category_price_id") {
		t.Errorf("an index was built beside the operator's one on the same key: %v", names)
	}
	if names := indexNames(t, events); slices.Contains(names, "actor_newest") {
		t.Errorf("an index was built at start-up on a collection with documents: %v", names)
	}
	// `mongo apply` builds what is missing, and still leaves the conflicting ones alone.
	if _, err := s.EnsureSchema(ctx, true); err != nil {
		t.Fatal(err)
	}
	if names := indexNames(t, events); !slices.Contains(names, "actor_newest") {
		t.Errorf("after a full build: %v, want actor_newest built", names)
	}
	if names := indexNames(t, products); !slices.Contains(names, "by_category_and_price") || slices.Contains(names, "category_price_id") {
		t.Errorf("after a full build: %v, want the operator's index left alone", names)
	}
}

// On an empty database Open creates every collection and index; a second run creates nothing.
func TestEnsureSchemaCreatesOnlyWhatIsMissing(t *testing.T) {
	_, db := freshDB(t)
	ctx := context.Background()
	s, err := Open(ctx, Options{URI: testURI, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.EnsureSchema(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Created)+len(rep.Missing)+len(rep.Conflicts) != 0 {
		t.Errorf("second EnsureSchema: %+v, want nothing to do", rep)
	}
	for coll, ixs := range schemaIndexes() {
		names := indexNames(t, s.db.Collection(coll))
		for _, ix := range ixs {
			if !slices.Contains(names, ix.Name) {
				t.Errorf("%s lacks index %s (has %v)", coll, ix.Name, names)
			}
		}
	}
}

func indexNames(t *testing.T, c *mongo.Collection) []string {
	t.Helper()
	specs, err := c.Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// checkEveryIndexIsUsed fails for an index the schema creates that no operation of the
// contract suite used ($indexStats counts each index's accesses on the real server): such an
// index only costs a write on every change. TTL indexes are used by the server's TTL monitor.
func checkEveryIndexIsUsed(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for coll, ixs := range schemaIndexes() {
		cur, err := s.db.Collection(coll).Aggregate(ctx, bson.A{d(e("$indexStats", bson.D{}))})
		if err != nil {
			t.Fatalf("$indexStats %s: %v", coll, err)
		}
		var stats []struct {
			Name     string `bson:"name"`
			Accesses struct {
				Ops int64 `bson:"ops"`
			} `bson:"accesses"`
		}
		if err := cur.All(ctx, &stats); err != nil {
			t.Fatal(err)
		}
		for _, ix := range ixs {
			if ix.TTL {
				continue
			}
			i := slices.IndexFunc(stats, func(st struct {
				Name     string `bson:"name"`
				Accesses struct {
					Ops int64 `bson:"ops"`
				} `bson:"accesses"`
			}) bool {
				return st.Name == ix.Name
			})
			if i < 0 {
				t.Errorf("%s.%s: not on the server", coll, ix.Name)
			} else if stats[i].Accesses.Ops == 0 {
				t.Errorf("%s.%s %s: no operation of the contract suite used it (%s); drop it or use it", coll, ix.Name, ix.Key.Doc(), ix.Why)
			}
		}
	}
}

// The outbox partition count is recorded with the database: opening it with another count
// would move keys between partitions, so it is refused.
func TestOutboxPartitionCountIsFixed(t *testing.T) {
	_, db := freshDB(t)
	ctx := context.Background()
	s, err := Open(ctx, Options{URI: testURI, Database: db, OutboxPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := len((*outboxLog)(s).Partitions()); got != 4 {
		t.Errorf("%d partitions, want 4", got)
	}
	_, err = Open(ctx, Options{URI: testURI, Database: db, OutboxPartitions: 8})
	if err == nil || !strings.Contains(err.Error(), "created with 4 outbox partitions, opened with 8") {
		t.Fatalf("reopen with another count: %v", err)
	}
}
