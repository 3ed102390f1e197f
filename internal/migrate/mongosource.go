package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// MongoSource reads the collections internal/store/mongostore writes (a replica set or a
// mongos), from the primary at readConcern "majority": a row is a state that survives a
// failover, never one a rollback could take back after it reached Cassandra.
//
// Keys: sessions, order history and products are keyed by their _id (the session id, order id
// and product id), whose index every collection has. Carts and events are not: a cart's _id is
// its owner's slot ("active:u:<user>") until it is retired to _id = cart_id, and an event's _id
// is a time-ordered ObjectId. Their keys (cart_id, event_id) have no index in the shop's schema
// on purpose (each would cost a write per cart change or event, for no shop query), so Read and
// Split still work without one, by a collection scan per range, and EnsureIndexes builds the
// two indexes for the length of the migration (DropIndexes removes them). Where each family
// lives is its family file's mongo().
type MongoSource struct {
	client *mongo.Client
	db     *mongo.Database
	// Retention is the events' retention, for their Expires (0: event.DefaultRetention).
	Retention time.Duration
}

// mongoFamily is where a family lives and which field holds its key; index names the key's
// index EnsureIndexes builds ("": the key is _id); snapshot reads at "snapshot" (carts).
type mongoFamily struct {
	coll, key, index string
	snapshot         bool
}

// mongoFamilies is every family's mongoFamily.
var mongoFamilies = func() map[Family]mongoFamily {
	m := map[Family]mongoFamily{}
	for f, fam := range registry {
		m[f] = fam.mongo()
	}
	return m
}()

// OpenMongoSource connects to uri and reads database.
func OpenMongoSource(ctx context.Context, uri, database string) (*MongoSource, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Majority()))
	if err != nil {
		return nil, fmt.Errorf("migrate: connect to MongoDB: %w", err)
	}
	if err := c.Ping(ctx, readpref.Primary()); err != nil {
		_ = c.Disconnect(context.Background())
		return nil, fmt.Errorf("migrate: connect to MongoDB: %w", access.Explain(err))
	}
	return &MongoSource{client: c, db: c.Database(database)}, nil
}

func (s *MongoSource) Close() error { return s.client.Disconnect(context.Background()) }

// EnsureIndexes builds the key indexes the shop's schema does not have ({cart_id: 1},
// {event_id: 1}), so every family's ranges are index range scans. On a large events
// collection the build takes a while (it runs online); building an existing index is a no-op.
func (s *MongoSource) EnsureIndexes(ctx context.Context) error {
	for _, f := range Families {
		mf := mongoFamilies[f]
		if mf.index == "" {
			continue
		}
		_, err := s.db.Collection(mf.coll).Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: mf.key, Value: 1}}, Options: options.Index().SetName(mf.index)})
		if err != nil {
			return fmt.Errorf("migrate: index %s.%s: %w", mf.coll, mf.key, access.Explain(err))
		}
	}
	return nil
}

// DropIndexes removes what EnsureIndexes built, once the migration no longer reads MongoDB.
func (s *MongoSource) DropIndexes(ctx context.Context) error {
	for _, f := range Families {
		mf := mongoFamilies[f]
		if mf.index == "" {
			continue
		}
		err := s.db.Collection(mf.coll).Indexes().DropOne(ctx, mf.index)
		var ce mongo.CommandError
		if err != nil && !(errors.As(err, &ce) && ce.Code == 27) { // IndexNotFound
			return fmt.Errorf("migrate: drop index %s: %w", mf.index, err)
		}
	}
	return nil
}

// collection is mf's collection. A cart's lines live in its document, so majority gives one
// consistent cart; carts read at "snapshot" all the same, so a cart caught between its slot and
// its retired copy (retire writes one, then the other) is seen in both at one instant.
func (s *MongoSource) collection(mf mongoFamily) *mongo.Collection {
	if mf.snapshot {
		return s.db.Collection(mf.coll, options.Collection().SetReadConcern(readconcern.Snapshot()))
	}
	return s.db.Collection(mf.coll)
}

// Read returns the rows of f with keys in r, ordered by key: a range query on the key field.
func (s *MongoSource) Read(ctx context.Context, f Family, r Range) ([]Row, error) {
	fam, err := codecOf(f)
	if err != nil {
		return nil, err
	}
	mf := fam.mongo()
	bounds := bson.D{{Key: "$gte", Value: r.Lo}}
	if r.Hi != "" {
		bounds = append(bounds, bson.E{Key: "$lt", Value: r.Hi})
	}
	cur, err := s.collection(mf).Find(ctx, bson.D{{Key: mf.key, Value: bounds}},
		options.Find().SetSort(bson.D{{Key: mf.key, Value: 1}}).SetAllowDiskUse(true))
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	defer cur.Close(ctx)
	var out []Row
	for cur.Next(ctx) {
		row, retired, err := fam.decodeMongo(cur.Current)
		if err != nil {
			return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
		}
		fam.stamp(&row, s.Retention)
		if n := len(out); n > 0 && out[n-1].Key == row.Key {
			// Only a cart has two documents (slot and retired copy) for a moment: keep the
			// later state; on a tie the retired copy, which retire writes second.
			if row.Modified.After(out[n-1].Modified) || retired && !row.Modified.Before(out[n-1].Modified) {
				out[n-1] = row
			}
			continue
		}
		out = append(out, row)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	return out, nil
}

// Count is the exact number of documents of f (CountDocuments, not the metadata estimate,
// which is off after an unclean shutdown and on sharded clusters with orphans). A cart caught
// mid-retire counts twice.
func (s *MongoSource) Count(ctx context.Context, f Family) (int64, error) {
	fam, err := codecOf(f)
	if err != nil {
		return 0, err
	}
	mf := fam.mongo()
	n, err := s.db.Collection(mf.coll).CountDocuments(ctx, bson.D{})
	if err != nil {
		return 0, fmt.Errorf("migrate: count %s: %w", f, err)
	}
	return n, nil
}

// Split walks f's keys once in key order (an index scan returning only the key) and keeps every
// (count/n)-th. $bucketAuto would send back only the n boundaries, but it sorts every key in
// memory (spilling to disk past 100 MB) instead of reading them in index order.
func (s *MongoSource) Split(ctx context.Context, f Family, n int) ([]Range, error) {
	fam, err := codecOf(f)
	if err != nil {
		return nil, err
	}
	mf := fam.mongo()
	step, err := splitStep(ctx, s, f, n)
	if err != nil {
		return nil, err
	}
	if step == 0 {
		return SplitKeys(nil), nil
	}
	proj := bson.D{{Key: "_id", Value: 0}, {Key: mf.key, Value: 1}}
	if mf.key == "_id" {
		proj = bson.D{{Key: "_id", Value: 1}}
	}
	cur, err := s.db.Collection(mf.coll).Find(ctx, bson.D{},
		options.Find().SetSort(bson.D{{Key: mf.key, Value: 1}}).SetProjection(proj).SetAllowDiskUse(true).SetBatchSize(10000))
	if err != nil {
		return nil, fmt.Errorf("migrate: split %s: %w", f, err)
	}
	defer cur.Close(ctx)
	var points []string
	for i := int64(1); cur.Next(ctx) && len(points) < n-1; i++ {
		if i%step != 0 {
			continue
		}
		k, ok := cur.Current.Lookup(mf.key).StringValueOK()
		if !ok {
			return nil, fmt.Errorf("migrate: split %s: key %s is a %s, want a string", f, mf.key, cur.Current.Lookup(mf.key).Type)
		}
		points = append(points, k)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("migrate: split %s: %w", f, err)
	}
	return SplitKeys(points), nil
}

// ReadCarts reads carts ids of owner and the owner's active cart id (the dual-write mirror).
// The owner's slot document holds the active cart, so one lookup by _id says which it is.
func (s *MongoSource) ReadCarts(ctx context.Context, owner cart.Owner, ids []string) (rows []Row, active string, err error) {
	for _, id := range ids {
		rs, err := s.Read(ctx, Carts, keyOnly(id))
		if err != nil {
			return nil, "", err
		}
		rows = append(rows, rs...)
	}
	var slot struct {
		CartID string `bson:"cart_id"`
		Status string `bson:"status"`
	}
	err = s.collection(mongoFamilies[Carts]).FindOne(ctx, bson.D{{Key: "_id", Value: mongostore.ActiveCartSlot(owner)}}).Decode(&slot)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return rows, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("migrate: read %s cart slot: %w", owner.Key(), err)
	}
	if cart.Status(slot.Status) == cart.Active {
		active = slot.CartID
	}
	return rows, active, nil
}
