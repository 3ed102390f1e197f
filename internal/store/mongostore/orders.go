package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/readrouting"
)

type orders Store

func (r *orders) store() *Store { return (*Store)(r) }

// errKeyTaken: another Place with the same (user, key) committed while this one ran.
var errKeyTaken = errors.New("idempotency key claimed by a concurrent order")

// Indexes of the claims Place inserts, in insertion order.
const (
	claimKey = iota
	claimCart
	claimOrder
)

// placeClaims are the three unique values an order takes: its idempotency key per user, its
// cart, and its own id (orders' _id is unique only per shard under {user_id: hashed}).
func placeClaims(p order.Placement) []any {
	return []any{
		claimDoc{ID: keyClaimID(p.UserID, p.IdempotencyKey), UserID: p.UserID, OrderID: p.OrderID, At: p.At},
		claimDoc{ID: cartClaimID(p.CartID), UserID: p.UserID, OrderID: p.OrderID, At: p.At},
		claimDoc{ID: orderClaimID(p.OrderID), UserID: p.UserID, OrderID: p.OrderID, At: p.At},
	}
}

// Place is ORD-1 in ONE multi-document transaction (see order.Repository): an earlier order
// under the key is returned; otherwise the key, cart and order-id claims are inserted, each
// line's stock is taken by a findAndModify guarded in its filter and targeted by
// {category, _id} (the category is on the line), the price is read from the document that
// update returns (the primary's current version: PRD-4), the order is inserted and the
// order.placed event appended, and everything commits together or not at all.
//
// The transaction starts with that read, not with the claims' insert (which would answer
// "was this key used?" through the unique _id, one round trip sooner), because its first
// command is the one that opens the transaction on the server. Sent to a primary that has
// frozen or been cut off, it waits in the socket and runs when the member comes back; the
// client gave up long before and sent its abort to the new primary, so nothing aborts that
// transaction where it runs. MongoDB 6.0 keeps it open, through the member's step-down and
// its later re-election, until transactionLifetimeLimitSeconds (60 s), and keeps the locks
// of whatever it wrote. Opened by the insert, it held the key's and the cart's claims: every
// retry of the key met a write conflict until its deadline, and the cart's fence (a plain
// insert of the same claim) waited on the server with its connection (the fault tests: keys
// unanswered for 60 s after the set was healthy again). Opened by a read, it holds nothing.
func (r *orders) Place(ctx context.Context, p order.Placement) (order.Order, bool, error) {
	if err := order.ValidatePlacement(p); err != nil {
		return order.Order{}, false, err
	}
	s := r.store()
	var o order.Order
	var created bool
	err := s.inTxn(ctx, func(ctx context.Context) error {
		o, created = order.Order{}, false // the callback may run again: start clean
		existing, err := orderByKey(ctx, s.coll(collClaims), s.coll(collOrders), p.UserID, p.IdempotencyKey)
		if err == nil {
			o = existing
			return nil
		}
		if !errors.Is(err, order.ErrNotFound) {
			return err
		}
		if _, err := s.coll(collClaims).InsertMany(ctx, placeClaims(p)); err != nil {
			switch i, dup := dupIndex(err); {
			case dup && i == claimKey:
				return errKeyTaken
			case dup && i == claimCart:
				return order.ErrCartAlreadyOrdered
			case dup && i == claimOrder:
				return fmt.Errorf("mongo: order id %s is already used by another order", p.OrderID)
			}
			return fmt.Errorf("mongo: claim order keys: %w", err)
		}
		priced := make([]order.Priced, 0, len(p.Lines))
		for _, l := range p.Lines {
			doc, err := s.changeStock(ctx, catalog.Ref{ID: l.ProductID, Category: l.Category}, p.Zone, -l.Quantity)
			if err != nil {
				return err
			}
			l.Category = doc.Category
			priced = append(priced, order.Priced{Line: l, Name: doc.Name, UnitPrice: money.Amount(doc.Price)})
		}
		if o, err = order.New(p, priced); err != nil {
			return err
		}
		if _, err := s.coll(collOrders).InsertOne(ctx, toOrderDoc(o)); err != nil {
			return fmt.Errorf("mongo: insert order: %w", err)
		}
		created = true
		return s.appendOrderEvent(ctx, outbox.TopicOrderPlaced, o)
	})
	if errors.Is(err, errKeyTaken) {
		existing, err := r.ByIdempotencyKey(ctx, p.UserID, p.IdempotencyKey)
		if err != nil {
			return order.Order{}, false, fmt.Errorf("mongo: idempotency key taken, but its order cannot be read: %w", err)
		}
		return existing, false, nil
	}
	var short *catalog.InsufficientStockError
	if errors.As(err, &short) {
		err = s.confirmShort(ctx, short, err)
	}
	if err != nil {
		return order.Order{}, false, err
	}
	return o, created, nil
}

// FenceCart inserts the cart's claim with no order in it, the same unique _id Place claims:
// whichever comes first wins, so a fenced cart can never be ordered, and an ordered cart's
// claim names its order.
func (r *orders) FenceCart(ctx context.Context, cartID string) (string, error) {
	claims := r.store().coll(collClaims)
	_, err := claims.InsertOne(ctx, claimDoc{ID: cartClaimID(cartID), At: time.Now().UTC()})
	if err == nil {
		return "", nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return "", fmt.Errorf("mongo: fence cart %s: %w", cartID, err)
	}
	var c claimDoc
	if _, err := decodeOne(claims.FindOne(ctx, d(e("_id", cartClaimID(cartID)))), &c); err != nil {
		return "", fmt.Errorf("mongo: read cart claim %s: %w", cartID, err)
	}
	return c.OrderID, nil
}

func (s *Store) appendOrderEvent(ctx context.Context, topic string, o order.Order) error {
	payload, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return s.appendOutbox(ctx, topic, o.ID, payload, o.UpdatedAt)
}

// orderByKey resolves the key claim, then reads the order targeted by {user_id, _id}.
func orderByKey(ctx context.Context, claims, orders *mongo.Collection, userID, key string) (order.Order, error) {
	var c claimDoc
	found, err := decodeOne(claims.FindOne(ctx, d(e("_id", keyClaimID(userID, key)))), &c)
	if err != nil {
		return order.Order{}, fmt.Errorf("mongo: read idempotency claim: %w", err)
	}
	if !found {
		return order.Order{}, order.ErrNotFound
	}
	return loadOrder(ctx, orders, c.UserID, c.OrderID)
}

// orderByID reads an order by its id alone. Behind a mongos it resolves the order-id claim (the
// user, the shard key, is not known from the id), then reads the order targeted: two
// single-shard reads instead of a broadcast on _id. A replica set has one copy of orders and a
// unique _id index: the order is read by _id in one round trip (the claim and the order commit
// in one transaction, so either both exist or neither).
func (s *Store) orderByID(ctx context.Context, claims, orders *mongo.Collection, id string) (order.Order, error) {
	if s.unsharded {
		var doc orderDoc
		found, err := decodeOne(orders.FindOne(ctx, d(e("_id", id))), &doc)
		if err != nil {
			return order.Order{}, fmt.Errorf("mongo: read order %s: %w", id, err)
		}
		if !found {
			return order.Order{}, order.ErrNotFound
		}
		return doc.order(), nil
	}
	var c claimDoc
	found, err := decodeOne(claims.FindOne(ctx, d(e("_id", orderClaimID(id)))), &c)
	if err != nil {
		return order.Order{}, fmt.Errorf("mongo: read order claim: %w", err)
	}
	if !found {
		return order.Order{}, order.ErrNotFound
	}
	return loadOrder(ctx, orders, c.UserID, id)
}

func loadOrder(ctx context.Context, orders *mongo.Collection, userID, id string) (order.Order, error) {
	var doc orderDoc
	found, err := decodeOne(orders.FindOne(ctx, orderKey(userID, id)), &doc)
	if err != nil {
		return order.Order{}, fmt.Errorf("mongo: read order %s: %w", id, err)
	}
	if !found {
		return order.Order{}, order.ErrNotFound
	}
	return doc.order(), nil
}

// GetOrder is ORD-3. It reads under the 5 s status budget, but a secondary's answer is kept only
// when it cannot hide a payment: "created" (which a lagging secondary shows for an order that is
// paid already) and "not found" are confirmed on the primary, so "is it paid?" is always answered
// by the primary (RPL-1: status paid is read from the primary only).
func (r *orders) GetOrder(ctx context.Context, id string) (order.Order, error) {
	s := r.store()
	claims, dec := s.reader(collClaims, readrouting.OpOrderStatus)
	ords := s.routed(collOrders, dec)
	o, err := s.orderByID(ctx, claims, ords, id)
	if dec.Target == readrouting.Secondary && needsPrimary(o, err) {
		return s.orderByID(ctx, s.coll(collClaims), s.coll(collOrders), id)
	}
	return o, err
}

// needsPrimary reports whether a secondary's GetOrder answer may be hiding a paid order.
func needsPrimary(o order.Order, err error) bool {
	if err != nil {
		return errors.Is(err, order.ErrNotFound)
	}
	return o.Status == order.Created
}

// ByIdempotencyKey reads from the primary: it decides whether a retry creates an order.
func (r *orders) ByIdempotencyKey(ctx context.Context, userID, key string) (order.Order, error) {
	s := r.store()
	return orderByKey(ctx, s.coll(collClaims), s.coll(collOrders), userID, key)
}

// Transition is ORD-3's state machine in one transaction: the status change (compare-and-set on
// the status read), the restock on cancel (targeted by each item's {category, _id}) and the
// order.status_changed event.
func (r *orders) Transition(ctx context.Context, id string, to order.Status, at time.Time) (order.Order, error) {
	s := r.store()
	var o order.Order
	err := s.inTxn(ctx, func(ctx context.Context) error {
		var err error
		o, err = s.orderByID(ctx, s.coll(collClaims), s.coll(collOrders), id)
		if err != nil {
			return err
		}
		from := o.Status
		if err := o.TransitionTo(to, at); err != nil {
			return err
		}
		if order.Restocks(to) {
			for _, it := range o.Items {
				_, err := s.changeStock(ctx, catalog.Ref{ID: it.ProductID, Category: it.Category}, o.Zone, it.Quantity)
				if err != nil && !errors.Is(err, catalog.ErrNotFound) { // a product gone from the catalog takes nothing back
					return err
				}
			}
		}
		res, err := s.coll(collOrders).UpdateOne(ctx, orderStatusFilter(o.UserID, o.ID, string(from)),
			d(e("$set", d(e("status", string(o.Status)), e("updated_at", o.UpdatedAt)))))
		if err != nil {
			return fmt.Errorf("mongo: update order status: %w", err)
		}
		if res.MatchedCount != 1 {
			return fmt.Errorf("mongo: order %s changed during its transition", id)
		}
		return s.appendOrderEvent(ctx, outbox.TopicOrderStatus, o)
	})
	if errors.Is(err, order.ErrIllegalTransition) {
		err = s.confirmIllegal(ctx, id, to, at, err)
	}
	if err != nil {
		return order.Order{}, err
	}
	return o, nil
}
