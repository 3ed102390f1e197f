package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// MongoMirror is the dual-write phase's writer into MongoDB: after the old store commits a
// change, it reads the changed keys back and writes them at the time of that read (a
// session), or as they are (history, events); a session gone from the old store is deleted
// with a tombstone (the package's ordering rule above).
type MongoMirror struct {
	Src MirrorSource
	Dst *MongoTarget
	Now func() time.Time
	keyClock
}

// Keys copies keys of f as the old store holds them now.
func (m *MongoMirror) Keys(ctx context.Context, f Family, keys ...string) error {
	for _, k := range keys {
		if err := m.key(ctx, f, k); err != nil {
			return err
		}
	}
	return nil
}

func (m *MongoMirror) key(ctx context.Context, f Family, key string) error {
	if err := mongoFamilyOK(f); err != nil {
		return err
	}
	if f == Carts {
		return m.cart(ctx, key)
	}
	defer m.lock(string(f) + "/" + key)()
	rows, err := m.Src.Read(ctx, f, keyOnly(key))
	if err != nil {
		return err
	}
	now := m.now()
	ts := m.tick(now)
	if f == Sessions {
		for i := range rows {
			rows[i].Modified = ts
		}
		if len(rows) == 0 || rows[0].expired(now, 0) {
			return m.Dst.deleteAt(ctx, f, key, "", ts)
		}
	}
	_, err = m.Dst.Write(ctx, f, rows, now)
	return err
}

func (m *MongoMirror) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// cart copies cart id with its owner's carts, the owner found on whichever side holds it.
func (m *MongoMirror) cart(ctx context.Context, id string) error {
	rows, err := m.Src.Read(ctx, Carts, keyOnly(id))
	if err != nil {
		return err
	}
	if len(rows) > 0 {
		return m.Carts(ctx, rows[0].Cart.Owner, id)
	}
	raw, err := m.Dst.db.Collection(mongostore.CartsCollection).FindOne(ctx, bson.D{{Key: "cart_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("migrate: cart %s is in neither store", id)
	}
	if err != nil {
		return fmt.Errorf("migrate: find cart %s: %w", id, err)
	}
	c, _, err := mongostore.DecodeCart(raw)
	if err != nil {
		return err
	}
	return m.Carts(ctx, c.Owner, id)
}

// Carts copies carts ids of owner, the cart in the owner's slot in MongoDB and the owner's
// active cart as the old store holds them now, at the time of that read: a cart gone from the
// old store is deleted (with a tombstone), the rest are written at the place their status
// gives them (reconcileCarts).
func (m *MongoMirror) Carts(ctx context.Context, owner cart.Owner, ids ...string) error {
	defer m.lock("c/" + owner.Key())()
	prev, err := m.Dst.slotCart(ctx, owner)
	if err != nil {
		return err
	}
	ids, rows, _, err := readMirroredCarts(ctx, m.Src, owner, ids, prev)
	if err != nil {
		return err
	}
	now := m.now()
	ts := m.tick(now)
	held := map[string]bool{}
	for i := range rows {
		rows[i].Modified = ts
		held[rows[i].Key] = true
	}
	if _, err := m.Dst.Write(ctx, Carts, rows, now); err != nil {
		return err
	}
	slot := mongostore.ActiveCartSlot(owner)
	for _, id := range ids {
		if !held[id] {
			if err := m.Dst.deleteAt(ctx, Carts, id, slot, ts); err != nil {
				return err
			}
		}
	}
	return nil
}

// slotCart is the id of the cart in owner's slot ("" for none).
func (t *MongoTarget) slotCart(ctx context.Context, owner cart.Owner) (string, error) {
	var doc struct {
		CartID string `bson:"cart_id"`
	}
	err := t.db.Collection(mongostore.CartsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: mongostore.ActiveCartSlot(owner)}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("migrate: read %s cart slot: %w", owner.Key(), err)
	}
	return doc.CartID, nil
}

// OwnerCarts reads owner's carts from MongoDB and the active one's id ("" for none): what the
// rollback path copies back to the embedded store while MongoDB serves carts. Without the
// owner in the shard key it is a broadcast on a sharded cluster, once per cart operation
// during a cutover.
func (t *MongoTarget) OwnerCarts(ctx context.Context, owner cart.Owner) ([]cart.Cart, string, error) {
	cur, err := t.db.Collection(mongostore.CartsCollection).Find(ctx, mongostore.CartOwnerFilter(owner))
	if err != nil {
		return nil, "", fmt.Errorf("migrate: read %s carts: %w", owner.Key(), err)
	}
	defer cur.Close(ctx)
	var cs []cart.Cart
	active := ""
	seen := map[string]bool{}
	for cur.Next(ctx) {
		c, retired, err := mongostore.DecodeCart(cur.Current)
		if err != nil {
			return nil, "", err
		}
		if !retired && c.Status == cart.Active {
			active = c.ID
		}
		if !seen[c.ID] {
			seen[c.ID] = true
			cs = append(cs, c)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, "", fmt.Errorf("migrate: read %s carts: %w", owner.Key(), err)
	}
	return cs, active, nil
}
