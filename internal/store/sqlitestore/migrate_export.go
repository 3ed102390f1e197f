package sqlitestore

import (
	"fmt"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// What `shardmart migrate` (internal/migrate) needs to read each family as this store does,
// from its own read-only connection to the file: the store's own columns and row decoders.

// ProductSelect selects products (table alias p), each with its stock; the caller adds its
// WHERE on p.id.
const ProductSelect = `SELECT ` + productColumns + ` FROM products p`

// ScanProduct decodes a row of ProductSelect.
func ScanProduct(row rowScanner) (catalog.Product, error) {
	return scanProduct(row)
}

// HistorySelect selects history entries; the caller adds its WHERE.
const HistorySelect = `SELECT ` + historyColumns + ` FROM order_history`

// ScanHistoryEntry decodes a row of HistorySelect.
func ScanHistoryEntry(row rowScanner) (history.Entry, error) {
	return scanEntry(row)
}

// EventSelect selects events; the caller adds its WHERE.
const EventSelect = `SELECT ` + eventColumns + ` FROM events`

// ScanEvent decodes a row of EventSelect.
func ScanEvent(row rowScanner) (event.Event, error) { return scanEvent(row) }

// SessionSelect selects sessions; the caller adds its WHERE.
const SessionSelect = `SELECT ` + sessionColumns + ` FROM sessions`

// ScanSession decodes a row of SessionSelect.
func ScanSession(row rowScanner) (session.Session, error) { return scanSession(row) }

// CartSelect selects cart headers with their owner; the caller adds its WHERE.
const CartSelect = `SELECT owner, ` + cartColumns + ` FROM carts`

// ScanCart decodes a row of CartSelect: the cart without its lines.
func ScanCart(row rowScanner) (cart.Cart, error) {
	var c cartRow
	var owner string
	if err := row.Scan(append([]any{&owner}, c.dest()...)...); err != nil {
		return cart.Cart{}, err
	}
	o, ok := cart.ParseOwnerKey(owner)
	if !ok {
		return cart.Cart{}, fmt.Errorf("cart %s: owner %q", c.id, owner)
	}
	return c.cart(o), nil
}

// CartItemSelect selects cart lines with their cart's id; the caller adds its WHERE.
const CartItemSelect = `SELECT cart_id, ` + cartItemColumns + ` FROM cart_items`

// ScanCartItem decodes a row of CartItemSelect.
func ScanCartItem(row rowScanner) (cartID string, it cart.Item, err error) {
	it, err = scanCartItem(row, &cartID)
	return cartID, it, err
}
