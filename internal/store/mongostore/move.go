package mongostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// What a move of the orders family from the embedded store (internal/mongomove) writes and
// reads back: the repositories' own documents, written as upserts keyed by each collection's
// full shard key, so that copying the same rows again replaces them and never duplicates.

// MovedCollections are the collections the orders family occupies, in copy order.
var MovedCollections = []string{collProducts, collUsers, collOrders, collClaims, collOutbox, collCounters, collCheckpoints}

// ClaimRow is one claims document: a cluster-wide unique value (see claimDoc).
type ClaimRow struct {
	ID, UserID, OrderID, Category string
	At                            time.Time
}

// ProductClaim, OrderClaims and FenceClaim are the claims the repositories write for a
// product, an order (its idempotency key, its cart, its id) and a fenced cart.
func ProductClaim(p catalog.Product) ClaimRow {
	return ClaimRow{ID: productClaimID(p.ID), Category: p.Category, At: p.CreatedAt}
}

func OrderClaims(o order.Order) []ClaimRow {
	return []ClaimRow{
		{ID: keyClaimID(o.UserID, o.IdempotencyKey), UserID: o.UserID, OrderID: o.ID, At: o.CreatedAt},
		{ID: cartClaimID(o.CartID), UserID: o.UserID, OrderID: o.ID, At: o.CreatedAt},
		{ID: orderClaimID(o.ID), UserID: o.UserID, OrderID: o.ID, At: o.CreatedAt},
	}
}

func FenceClaim(cartID string, at time.Time) ClaimRow {
	return ClaimRow{ID: cartClaimID(cartID), At: at}
}

// bulkPut writes n documents, doc(i) found by filter(i), in batches of 1000: an unordered
// insert first (most of a move is new documents, and an insert is cheaper than an upsert),
// then, for the documents a key already holds (a copy run again), a replace. A document that
// exists is thus rewritten with what the source holds now, never duplicated.
func (s *Store) bulkPut(ctx context.Context, coll string, n int, filter func(i int) bson.D, doc func(i int) any) error {
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		docs := make([]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			docs = append(docs, doc(i))
		}
		_, err := s.coll(coll).InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		if err == nil {
			continue
		}
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
			return fmt.Errorf("mongo: copy into %s: %w", coll, err)
		}
		var models []mongo.WriteModel
		for _, we := range bwe.WriteErrors {
			if we.Code != codeDuplicateKey {
				return fmt.Errorf("mongo: copy into %s: %w", coll, err)
			}
			i := lo + we.Index
			models = append(models, mongo.NewReplaceOneModel().SetFilter(filter(i)).SetReplacement(doc(i)).SetUpsert(true))
		}
		if _, err := s.coll(coll).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
			return fmt.Errorf("mongo: copy into %s: %w", coll, err)
		}
	}
	return nil
}

// PutProducts writes products (stock included) and their claims.
func (s *Store) PutProducts(ctx context.Context, ps []catalog.Product) error {
	err := s.bulkPut(ctx, collProducts, len(ps), func(i int) bson.D { return productKey(catalog.Ref{ID: ps[i].ID, Category: ps[i].Category}) },
		func(i int) any { return toProductDoc(ps[i]) })
	if err != nil {
		return err
	}
	claims := make([]ClaimRow, len(ps))
	for i, p := range ps {
		claims[i] = ProductClaim(p)
	}
	return s.PutClaims(ctx, claims)
}

// PutOrders writes orders and their claims.
func (s *Store) PutOrders(ctx context.Context, os []order.Order) error {
	err := s.bulkPut(ctx, collOrders, len(os), func(i int) bson.D { return d(e("user_id", os[i].UserID), e("_id", os[i].ID)) },
		func(i int) any { return toOrderDoc(os[i]) })
	if err != nil {
		return err
	}
	var claims []ClaimRow
	for _, o := range os {
		claims = append(claims, OrderClaims(o)...)
	}
	return s.PutClaims(ctx, claims)
}

// PutUsers writes users, password hashes as they are.
func (s *Store) PutUsers(ctx context.Context, us []account.User) error {
	return s.bulkPut(ctx, collUsers, len(us), func(i int) bson.D { return d(e("_id", us[i].Email)) },
		func(i int) any {
			return userDoc{Email: us[i].Email, UserID: us[i].ID, PasswordHash: us[i].PasswordHash, CreatedAt: us[i].CreatedAt}
		})
}

// PutClaims writes claims.
func (s *Store) PutClaims(ctx context.Context, cs []ClaimRow) error {
	return s.bulkPut(ctx, collClaims, len(cs), func(i int) bson.D { return d(e("_id", cs[i].ID)) },
		func(i int) any {
			c := cs[i]
			return claimDoc{ID: c.ID, UserID: c.UserID, OrderID: c.OrderID, Category: c.Category, At: c.At}
		})
}

// PlacedMessage is an outbox message as this store keeps it: its partition and its seq there.
type PlacedMessage struct {
	Partition int32
	outbox.Message
}

// PlaceOutbox gives msgs, in the order they were appended elsewhere, the partitions and seqs
// this store gives them; and, for every consumer whose checkpoint elsewhere is given, its
// checkpoint in each partition: the seq of the last message it had applied there. Every
// partition's seqs start after a base of ceil(lastSeq/partitions), so that the outbox's
// high-water mark (LastSeq, the sum of the counters) carries over: a shop with no pending
// message is not taken for an empty one, which serve would seed. The result depends on the
// inputs alone, so a copy run again writes the same documents.
func (s *Store) PlaceOutbox(msgs []outbox.Message, applied map[string]int64, lastSeq int64) (placed []PlacedMessage, checkpoints map[string][]int64, counters []int64) {
	base := (lastSeq + int64(s.partitions) - 1) / int64(s.partitions)
	counters = make([]int64, s.partitions)
	for p := range counters {
		counters[p] = base
	}
	checkpoints = map[string][]int64{}
	for c := range applied {
		checkpoints[c] = slices.Clone(counters)
	}
	for _, m := range msgs {
		p := s.outboxPartition(m.Key)
		counters[p]++
		for c, seq := range applied {
			if m.Seq <= seq {
				checkpoints[c][p] = counters[p]
			}
		}
		pm := PlacedMessage{Partition: p, Message: m}
		pm.Seq = counters[p]
		placed = append(placed, pm)
	}
	return placed, checkpoints, counters
}

// PutOutbox writes the placed messages, moves each partition's counter to at least its
// PlaceOutbox count, and sets the consumers' checkpoints.
func (s *Store) PutOutbox(ctx context.Context, placed []PlacedMessage, checkpoints map[string][]int64, counters []int64) error {
	err := s.bulkPut(ctx, collOutbox, len(placed), func(i int) bson.D { return d(e("p", placed[i].Partition), e("seq", placed[i].Seq)) },
		func(i int) any {
			m := placed[i]
			return outboxDoc{Partition: m.Partition, Seq: m.Seq, Topic: m.Topic, Key: m.Key, Payload: m.Payload, At: m.At}
		})
	if err != nil {
		return err
	}
	for p, seq := range counters {
		if _, err := s.coll(collCounters).UpdateOne(ctx, d(e("_id", counterID(int32(p)))), d(e("$max", d(e("seq", seq)))),
			options.UpdateOne().SetUpsert(true)); err != nil {
			return fmt.Errorf("mongo: outbox counter %d: %w", p, err)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(checkpoints)) {
		for p, seq := range checkpoints[c] {
			id := outboxPart{p: int32(p)}.checkpointID(c)
			if _, err := s.coll(collCheckpoints).UpdateOne(ctx, d(e("_id", id)), d(e("$set", d(e("seq", seq)))),
				options.UpdateOne().SetUpsert(true)); err != nil {
				return fmt.Errorf("mongo: checkpoint %s: %w", id, err)
			}
		}
	}
	return nil
}

// each decodes every document of coll into a D and calls fn with it.
func each[D any](ctx context.Context, s *Store, coll string, fn func(D) error) error {
	cur, err := s.coll(coll).Find(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("mongo: read %s: %w", coll, err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var doc D
		if err := cur.Decode(&doc); err != nil {
			return fmt.Errorf("mongo: decode %s: %w", coll, err)
		}
		if err := fn(doc); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("mongo: read %s: %w", coll, err)
	}
	return nil
}

// EachProduct, EachOrder, EachUser and EachClaim read a moved collection back as the
// repositories decode it.
func (s *Store) EachProduct(ctx context.Context, fn func(catalog.Product) error) error {
	return each(ctx, s, collProducts, func(doc productDoc) error { return fn(doc.product()) })
}

func (s *Store) EachOrder(ctx context.Context, fn func(order.Order) error) error {
	return each(ctx, s, collOrders, func(doc orderDoc) error { return fn(doc.order()) })
}

func (s *Store) EachUser(ctx context.Context, fn func(account.User) error) error {
	return each(ctx, s, collUsers, func(doc userDoc) error {
		return fn(account.User{ID: doc.UserID, Email: doc.Email, PasswordHash: doc.PasswordHash, CreatedAt: doc.CreatedAt.UTC()})
	})
}

func (s *Store) EachClaim(ctx context.Context, fn func(ClaimRow) error) error {
	return each(ctx, s, collClaims, func(doc claimDoc) error {
		return fn(ClaimRow{ID: doc.ID, UserID: doc.UserID, OrderID: doc.OrderID, Category: doc.Category, At: doc.At.UTC()})
	})
}

// EachOutbox reads every outbox message with its partition.
func (s *Store) EachOutbox(ctx context.Context, fn func(PlacedMessage) error) error {
	return each(ctx, s, collOutbox, func(doc outboxDoc) error {
		return fn(PlacedMessage{Partition: doc.Partition, Message: outbox.Message{Seq: doc.Seq, Topic: doc.Topic, Key: doc.Key, Payload: doc.Payload, At: doc.At.UTC()}})
	})
}

// OutboxCheckpoints reads consumer's checkpoint in every partition.
func (s *Store) OutboxCheckpoints(ctx context.Context, consumer string) ([]int64, error) {
	return (*outboxLog)(s).Checkpoints(ctx, consumer)
}

// OutboxCounters reads every partition's counter.
func (s *Store) OutboxCounters(ctx context.Context) ([]int64, error) {
	return (*outboxLog)(s).LastSeqs(ctx)
}

// ClearMoved deletes every document of the moved collections (an abandoned move's copy) and
// sets the outbox counters back to 0. Collections, indexes and sharding stay.
func (s *Store) ClearMoved(ctx context.Context) error {
	for _, c := range MovedCollections {
		filter := bson.D{}
		if c == collCounters {
			filter = d(e("_id", d(e("$ne", partitionsDocID))))
		}
		if _, err := s.coll(c).DeleteMany(ctx, filter); err != nil {
			return fmt.Errorf("mongo: clear %s: %w", c, err)
		}
	}
	for p := range int32(s.partitions) {
		if _, err := s.coll(collCounters).UpdateOne(ctx, d(e("_id", counterID(p))), d(e("$set", d(e("seq", int64(0))))),
			options.UpdateOne().SetUpsert(true)); err != nil {
			return fmt.Errorf("mongo: reset outbox counter %s: %w", counterID(p), err)
		}
	}
	return nil
}

// MovedCounts counts the documents of every moved collection.
func (s *Store) MovedCounts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, c := range MovedCollections {
		n, err := s.coll(c).CountDocuments(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("mongo: count %s: %w", c, err)
		}
		out[c] = n
	}
	return out, nil
}

const codeDuplicateKey = 11000
