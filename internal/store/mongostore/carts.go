package mongostore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/readrouting"
)

// Carts under the shard key {_id: "hashed"}. An owner's current cart is stored
// at an _id derived from the owner, activeCartID = "active:u:<user>" or "active:s:<session>"
// (its slot), so "the active cart of X" is a read by the shard key: one shard, one round trip,
// no lookup collection to keep in step. The cart's identity (cart.ID, what an order records) is
// a separate uuid in cart_id. When the slot's cart is ordered, abandoned or expired and the
// owner starts a new one, the old cart is first copied to _id = cart_id ("retired", still
// targeted by its id) and the slot is then replaced by compare-and-set on cart_id.
//
// Rejected alternative: a carts_by_owner {_id: owner} -> cart_id lookup. Also targeted, but every
// read is two round trips and every cart creation two writes that must agree (a transaction
// or a repair path); the slot needs neither.
type carts Store

func (r *carts) store() *Store { return (*Store)(r) }

// maxSlotAttempts bounds the optimistic loops; each lost race means another writer progressed.
const maxSlotAttempts = 16

var returnAfter = options.FindOneAndUpdate().SetReturnDocument(options.After)

// ActiveCart is CRT-2 (primary only in RPL-1: carts change constantly).
func (r *carts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	coll, _ := r.store().reader(collCarts, readrouting.OpCart)
	var doc cartDoc
	found, err := decodeOne(coll.FindOne(ctx, liveCartFilter(owner, now)), &doc)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("mongo: read active cart: %w", err)
	}
	if !found {
		return cart.Cart{}, cart.ErrNotFound
	}
	return doc.cart(), nil
}

// PutItem is CRT-1 and CRT-3 without a transaction, and on the common path in one command: a
// findAndModify with upsert on the editable slot that sets the line's quantity if the cart
// holds it and otherwise appends it while there is room (one update pipeline, atomic on the
// document), or, when the slot is empty, inserts the new cart holding the line. It returns the
// cart as written. A slot that exists but takes no edit (a checkout holds it, it is full, it
// was ordered, abandoned or expired) makes the upsert's insert collide on _id: only then is the
// slot read to say why, or retired and the put tried again. Concurrent puts of different
// products are separate atomic updates of one document, so none is lost.
//
// Every write waits for a majority, even one that fails: after a failover, when the majority
// commit point moves in steps of a heartbeat round, each wait costs. The common puts (into a
// live cart or into none) make one write and no read; only the rare slot that takes no edit
// pays a failed write before the read.
func (r *carts) PutItem(ctx context.Context, owner cart.Owner, it cart.Item, expiresAt, now time.Time) (cart.Cart, error) {
	s := r.store()
	coll := s.coll(collCarts)
	line := cartItemDoc{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity, AddedAt: it.AddedAt}
	for attempt := 0; attempt < maxSlotAttempts; attempt++ {
		fresh, err := newCart(owner, expiresAt, now)
		if err != nil {
			return cart.Cart{}, err
		}
		var doc cartDoc
		found, err := decodeOne(coll.FindOneAndUpdate(ctx, putLineFilter(owner, it.ProductID, now),
			putLineUpdate(line, fresh, now), upsertAfter), &doc)
		if err == nil && found {
			return doc.cart(), nil
		}
		if err != nil && !mongo.IsDuplicateKeyError(err) {
			return cart.Cart{}, fmt.Errorf("mongo: put cart line: %w", err)
		}
		// The slot holds a cart that takes no edit: read it to learn why.
		found, err = decodeOne(coll.FindOne(ctx, cartSlotFilter(owner)), &doc)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("mongo: read cart slot: %w", err)
		}
		switch {
		case !found:
			// Removed since the write: try again.
		case doc.live(now):
			if err := doc.cart().Editable(now); err != nil {
				return cart.Cart{}, err
			}
			if !holds(doc, it.ProductID) && len(doc.Items) >= cart.MaxItems {
				return cart.Cart{}, cart.ErrTooManyItems
			}
			// The checkout or the lines changed between the write and the read: try again.
		case mergedGuest(doc, now):
			return cart.Cart{}, cart.ErrGuestMerged
		default:
			// The new cart starts with the line: no second write to add it.
			fresh, took, err := r.retire(ctx, doc, expiresAt, now, []cartItemDoc{line})
			if err != nil {
				return cart.Cart{}, err
			}
			if took {
				return fresh.cart(), nil
			}
		}
	}
	return cart.Cart{}, fmt.Errorf("mongo: cart of %s: too much contention, gave up after %d attempts", owner.Key(), maxSlotAttempts)
}

var upsertAfter = options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)

func holds(doc cartDoc, productID string) bool {
	for _, it := range doc.Items {
		if it.ProductID == productID {
			return true
		}
	}
	return false
}

func newCart(owner cart.Owner, expiresAt, now time.Time) (cartDoc, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return cartDoc{}, err
	}
	return newCartDoc(owner, id.String(), expiresAt, now), nil
}

// retiredCopy is the finished cart moved out of the slot; an expired active cart retires as
// abandoned. It keeps expires_at, so the TTL index still removes a guest's old carts.
func retiredCopy(doc cartDoc) cartDoc {
	old := doc
	old.ID = doc.CartID
	if old.Status == string(cart.Active) {
		old.Status = string(cart.Abandoned)
	}
	return old
}

// mergedGuest reports a guest slot that login merged: abandoned before its expiry (an expired
// guest cart is merely past it). Its session must not start a cart nobody would see again.
func mergedGuest(doc cartDoc, now time.Time) bool {
	return doc.SessionID != nil && doc.Status == string(cart.Abandoned) && doc.ExpiresAt != nil && doc.ExpiresAt.After(now)
}

// retire copies a finished cart to _id = cart_id and puts a fresh cart holding items in the
// slot, compare-and-set on the old cart_id so that of two racing writers one replaces it. It
// returns the fresh cart and whether it took the slot.
func (r *carts) retire(ctx context.Context, doc cartDoc, expiresAt, now time.Time, items []cartItemDoc) (cartDoc, bool, error) {
	coll := r.store().coll(collCarts)
	if _, err := coll.InsertOne(ctx, retiredCopy(doc)); err != nil && !mongo.IsDuplicateKeyError(err) {
		return cartDoc{}, false, fmt.Errorf("mongo: retire cart %s: %w", doc.CartID, err)
	}
	fresh, err := newCart(doc.owner(), expiresAt, now)
	if err != nil {
		return cartDoc{}, false, err
	}
	if items != nil {
		fresh.Items = items
	}
	res, err := coll.ReplaceOne(ctx, slotCAS(doc), fresh)
	if err != nil {
		return cartDoc{}, false, fmt.Errorf("mongo: start a new cart: %w", err)
	}
	return fresh, res.MatchedCount == 1, nil
}

// slotCAS matches the slot only while it still holds doc's cart.
func slotCAS(doc cartDoc) bson.D {
	return append(cartSlotFilter(doc.owner()), e("cart_id", doc.CartID))
}

// RemoveItem is CRT-4: one $pull on the editable cart; if none matched, the slot says why.
func (r *carts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (cart.Cart, error) {
	coll := r.store().coll(collCarts)
	var doc cartDoc
	found, err := decodeOne(coll.FindOneAndUpdate(ctx, editableCartFilter(owner, now),
		removeLineUpdate(productID, now), returnAfter), &doc)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("mongo: remove cart line: %w", err)
	}
	if found {
		return doc.cart(), nil
	}
	return cart.Cart{}, r.whyNotEditable(ctx, owner, now)
}

// whyNotEditable explains a change that matched no editable cart: the checkout that holds it
// (cart.Cart.Editable), or no live cart at all.
func (r *carts) whyNotEditable(ctx context.Context, owner cart.Owner, now time.Time) error {
	var doc cartDoc
	found, err := decodeOne(r.store().coll(collCarts).FindOne(ctx, liveCartFilter(owner, now)), &doc)
	if err != nil {
		return fmt.Errorf("mongo: read cart: %w", err)
	}
	if !found {
		return cart.ErrNotFound
	}
	if err := doc.cart().Editable(now); err != nil {
		return err
	}
	// Unfrozen between the update and this read: the caller may simply try again.
	return cart.ErrCheckoutInProgress
}

// BeginCheckout freezes the editable cart with one findAndModify; the document it returns is
// exactly what the order will hold.
func (r *carts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (cart.Cart, error) {
	var doc cartDoc
	found, err := decodeOne(r.store().coll(collCarts).FindOneAndUpdate(ctx, editableCartFilter(owner, now),
		d(e("$set", d(e("checkout_order", orderID), e("checkout_until", until)))), returnAfter), &doc)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("mongo: freeze cart: %w", err)
	}
	if found {
		return doc.cart(), nil
	}
	return cart.Cart{}, r.whyNotEditable(ctx, owner, now)
}

// EndCheckout unfreezes the cart only while orderID's checkout holds it.
func (r *carts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	filter := append(cartSlotFilter(owner), e("cart_id", cartID), e("status", string(cart.Active)), e("checkout_order", orderID))
	if _, err := r.store().coll(collCarts).UpdateOne(ctx, filter,
		d(e("$unset", d(e("checkout_order", ""), e("checkout_until", ""))))); err != nil {
		return fmt.Errorf("mongo: release cart: %w", err)
	}
	return nil
}

// Reopen retires the fenced cart and puts a new one with its lines in the slot (retire's
// compare-and-set: of two racing reopens one replaces it, the other finds the new cart).
func (r *carts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (cart.Cart, error) {
	coll := r.store().coll(collCarts)
	for attempt := 0; attempt < maxSlotAttempts; attempt++ {
		var doc cartDoc
		found, err := decodeOne(coll.FindOne(ctx, liveCartFilter(owner, now)), &doc)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("mongo: read cart: %w", err)
		}
		if !found {
			return cart.Cart{}, cart.ErrNotFound
		}
		if doc.CartID != cartID {
			return doc.cart(), nil
		}
		expires := time.Time{}
		if doc.ExpiresAt != nil {
			expires = *doc.ExpiresAt
		}
		fenced := doc
		fenced.Status = string(cart.Abandoned)
		if _, _, err := r.retire(ctx, fenced, expires, now, doc.Items); err != nil {
			return cart.Cart{}, err
		}
	}
	return cart.Cart{}, fmt.Errorf("mongo: reopen cart of %s: too much contention, gave up after %d attempts", owner.Key(), maxSlotAttempts)
}

// mergeItems applies cart.MergeLines, the one CRT-5 rule, to stored lines.
func mergeItems(user, guest []cartItemDoc) (merged []cartItemDoc, notMerged []cart.Item) {
	m, notMerged := cart.MergeLines(cartItems(user), cartItems(guest))
	merged = make([]cartItemDoc, len(m))
	for i, it := range m {
		merged[i] = cartItemDoc{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity, AddedAt: it.AddedAt}
	}
	return merged, notMerged
}

func cartItems(docs []cartItemDoc) []cart.Item {
	out := make([]cart.Item, len(docs))
	for i, it := range docs {
		out[i] = cart.Item{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity, AddedAt: it.AddedAt}
	}
	return out
}

// Merge is CRT-5 in one transaction over the two slots (two targeted documents, possibly on two
// shards): read the guest's live cart, add its lines to the user's cart (creating it, or
// replacing a finished one), and mark the guest cart abandoned. With no live guest cart it
// changes nothing, so a repeated login is a no-op.
func (r *carts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (cart.MergeResult, error) {
	s := r.store()
	guest, user := cart.Guest(sessionID), cart.User(userID)
	var out cart.MergeResult
	err := s.inTxn(ctx, func(ctx context.Context) error {
		out = cart.MergeResult{} // the callback may run again: start clean
		coll := s.coll(collCarts)
		g, found, u, uFound, err := readMergeSlots(ctx, coll, guest, user, now)
		if err != nil {
			return err
		}
		if !found {
			if !uFound || !u.live(now) {
				return cart.ErrNotFound
			}
			out.Cart = u.cart()
			return nil
		}
		if uFound && u.live(now) {
			// A checkout holds the user's cart: the guest lines stay the guest's until it ends.
			if err := u.cart().Editable(now); err != nil {
				return err
			}
		}
		switch {
		case !uFound:
			if u, err = newCart(user, time.Time{}, now); err != nil {
				return err
			}
			u.Items, out.NotMerged = mergeItems(nil, g.Items)
			if _, err := coll.InsertOne(ctx, u); err != nil {
				return fmt.Errorf("mongo: create user cart: %w", err)
			}
		case !u.live(now):
			// Inside a transaction a duplicate key aborts everything, so look before inserting.
			var existing cartDoc
			retired, err := decodeOne(coll.FindOne(ctx, retiredCartFilter(user, u.CartID)), &existing)
			if err != nil {
				return fmt.Errorf("mongo: read retired cart: %w", err)
			}
			if !retired {
				if _, err := coll.InsertOne(ctx, retiredCopy(u)); err != nil {
					return fmt.Errorf("mongo: retire user cart: %w", err)
				}
			}
			old := u
			if u, err = newCart(user, time.Time{}, now); err != nil {
				return err
			}
			u.Items, out.NotMerged = mergeItems(nil, g.Items)
			if _, err := coll.ReplaceOne(ctx, slotCAS(old), u); err != nil {
				return fmt.Errorf("mongo: start user cart: %w", err)
			}
		default:
			u.Items, out.NotMerged = mergeItems(u.Items, g.Items)
			u.UpdatedAt = now
			if _, err := coll.UpdateOne(ctx, slotCAS(u),
				d(e("$set", d(e("items", u.Items), e("updated_at", now))))); err != nil {
				return fmt.Errorf("mongo: merge into user cart: %w", err)
			}
		}
		if _, err := coll.UpdateOne(ctx, slotCAS(g),
			d(e("$set", d(e("status", string(cart.Abandoned)), e("updated_at", now))))); err != nil {
			return fmt.Errorf("mongo: abandon guest cart: %w", err)
		}
		out.Cart = u.cart()
		return nil
	})
	if err != nil {
		return cart.MergeResult{}, err
	}
	return out, nil
}

// readMergeSlots reads the guest's live cart and the user's slot in one query (an $or of the two
// filters, each by its _id): one round trip instead of two.
func readMergeSlots(ctx context.Context, coll *mongo.Collection, guest, user cart.Owner, now time.Time) (g cartDoc, gFound bool, u cartDoc, uFound bool, err error) {
	cur, err := coll.Find(ctx, d(e("$or", bson.A{liveCartFilter(guest, now), cartSlotFilter(user)})))
	if err != nil {
		return g, false, u, false, fmt.Errorf("mongo: read guest and user carts: %w", err)
	}
	var docs []cartDoc
	if err := cur.All(ctx, &docs); err != nil {
		return g, false, u, false, fmt.Errorf("mongo: read guest and user carts: %w", err)
	}
	for _, doc := range docs {
		switch doc.ID {
		case activeCartID(guest):
			g, gFound = doc, true
		case activeCartID(user):
			u, uFound = doc, true
		}
	}
	return g, gFound, u, uFound, nil
}

// MarkOrdered is CRT-6, idempotent: the slot if it still holds the cart, else its retired copy.
func (r *carts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	coll := r.store().coll(collCarts)
	res, err := coll.UpdateOne(ctx, markOrderedFilter(owner, cartID), markOrderedUpdate(orderID, now))
	if err != nil {
		return fmt.Errorf("mongo: mark cart ordered: %w", err)
	}
	if res.MatchedCount > 0 {
		return nil
	}
	filter := append(retiredCartFilter(owner, cartID), e("status", d(e("$ne", string(cart.Ordered)))))
	if _, err := coll.UpdateOne(ctx, filter, markOrderedUpdate(orderID, now)); err != nil {
		return fmt.Errorf("mongo: mark retired cart ordered: %w", err)
	}
	return nil
}

// PurgeExpired deletes guest carts past their expiry now; the TTL index does the same within
// about a minute (its monitor runs every 60 s). A sweep has no shard key: a broadcast.
func (r *carts) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	res, err := r.store().coll(collCarts).DeleteMany(ctx, expiredFilter(now))
	if err != nil {
		return 0, fmt.Errorf("mongo: purge carts: %w", err)
	}
	return int(res.DeletedCount), nil
}

// RestoreCarts makes owner's carts hold exactly cs, active being the one active cart ("" for
// none): a migration's rollback path copies Cassandra's carts back here while Cassandra serves
// them (docs/migration.md). The active cart goes to the owner's slot, every other cart to its
// retired copy (_id = cart_id), leaving the slot if it held that cart.
func (r *carts) RestoreCarts(ctx context.Context, owner cart.Owner, cs []cart.Cart, active string) error {
	coll := r.store().coll(collCarts)
	slot := activeCartID(owner)
	for _, c := range cs {
		c.Owner = owner
		d := toCartDoc(c)
		if c.ID == active {
			d.ID = slot
		} else if c.Status == cart.Active {
			d.Status = string(cart.Abandoned) // Cassandra's active_cart says another cart is the live one
		}
		if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, d, options.Replace().SetUpsert(true)); err != nil {
			return fmt.Errorf("mongo: restore cart %s: %w", c.ID, err)
		}
		if c.ID != active {
			if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: slot}, {Key: "cart_id", Value: c.ID}}); err != nil {
				return fmt.Errorf("mongo: restore cart %s: %w", c.ID, err)
			}
		}
	}
	return nil
}
