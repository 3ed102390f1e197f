package mongostore

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// `shardmart migrate` (internal/migrate) reads these collections directly, by key range,
// and decodes with the repositories' own document types so a row is exactly what they return.
const (
	SessionsCollection = collSessions
	CartsCollection    = collCarts
	HistoryCollection  = collHistory
	EventsCollection   = collEvents
	ProductsCollection = collProducts
)

func decodeDoc[D, T any](raw bson.Raw, conv func(D) T) (T, error) {
	var doc D
	if err := bson.Unmarshal(raw, &doc); err != nil {
		var zero T
		return zero, fmt.Errorf("mongo: decode %T: %w", doc, err)
	}
	return conv(doc), nil
}

// DecodeSession decodes a sessions document as GetSession returns it.
func DecodeSession(raw bson.Raw) (session.Session, error) { return decodeDoc(raw, sessionDoc.session) }

// DecodeHistoryEntry decodes an order_history document as ListHistory returns it.
func DecodeHistoryEntry(raw bson.Raw) (history.Entry, error) { return decodeDoc(raw, historyDoc.entry) }

// DecodeEvent decodes an events document as ListEvents returns it.
func DecodeEvent(raw bson.Raw) (event.Event, error) { return decodeDoc(raw, eventDoc.event) }

// DecodeProduct decodes a products document as GetProduct returns it.
func DecodeProduct(raw bson.Raw) (catalog.Product, error) { return decodeDoc(raw, productDoc.product) }

// DecodeCart decodes a carts document; retired reports a cart moved out of its owner's slot
// (_id = cart_id), which for a moment coexists with the slot holding the same cart (retire).
func DecodeCart(raw bson.Raw) (c cart.Cart, retired bool, err error) {
	var doc cartDoc
	if err := bson.Unmarshal(raw, &doc); err != nil {
		return cart.Cart{}, false, fmt.Errorf("mongo: decode cart: %w", err)
	}
	return doc.cart(), doc.ID == doc.CartID, nil
}

// ActiveCartSlot is the _id of the document holding owner's active cart (migration mirrors).
func ActiveCartSlot(o cart.Owner) string { return activeCartID(o) }
