package mongostore

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// `shardmart migrate --to mongo` (internal/migrate) writes these documents itself, with the
// conditions its ordering rule needs, so the repositories read back exactly what they store.

// SessionDocument is s as CreateSession stores it.
func SessionDocument(s session.Session) any { return toSessionDoc(s) }

// HistoryDocument is h as UpsertEntry stores it, and the filter selecting it (shard key
// included, so a sharded write is targeted).
func HistoryDocument(h history.Entry) (doc any, key bson.D) {
	return toHistoryDoc(h), historyKey(h.UserID, h.OrderID)
}

// EventDocument is ev as AppendEvent stores it (its _id derived from the event).
func EventDocument(ev event.Event) (any, error) {
	id, err := eventObjectID(ev.Actor, ev.ID, ev.At)
	if err != nil {
		return nil, err
	}
	return eventDoc{ID: id, EventID: ev.ID, Actor: ev.Actor, Type: string(ev.Type), At: ev.At,
		ProductID: ev.ProductID, Details: toKV(ev.Details)}, nil
}

// toCartDoc is c at its retired place (_id = cart_id); in its owner's slot, _id is the slot's.
func toCartDoc(c cart.Cart) cartDoc {
	d := cartDoc{ID: c.ID, CartID: c.ID, Status: string(c.Status), OrderID: c.OrderID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		CheckoutOrder: c.CheckoutOrder}
	if c.Owner.IsGuest() {
		sid := c.Owner.SessionID
		d.SessionID = &sid
	} else {
		uid := c.Owner.UserID
		d.UserID = &uid
	}
	if !c.ExpiresAt.IsZero() {
		exp := c.ExpiresAt
		d.ExpiresAt = &exp
	}
	if !c.CheckoutUntil.IsZero() {
		until := c.CheckoutUntil
		d.CheckoutUntil = &until
	}
	d.Items = make([]cartItemDoc, len(c.Items))
	for i, it := range c.Items {
		d.Items[i] = cartItemDoc{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity, AddedAt: it.AddedAt}
	}
	return d
}

// CartDocument is c as the carts repository stores it: in its owner's slot (ActiveCartSlot)
// when inSlot, else retired at _id = cart_id.
func CartDocument(c cart.Cart, inSlot bool) any {
	d := toCartDoc(c)
	if inSlot {
		d.ID = activeCartID(c.Owner)
	}
	return d
}

// CartOwnerFilter selects every carts document of o (its slot and its retired carts).
func CartOwnerFilter(o cart.Owner) bson.D { return ownerFields(o) }
