// Package history is the order-history read model (ORD-2, HIS-1): per user, newest first.
// It is fed from the outbox by the projector, so it may live in another store than orders.
package history

import (
	"context"
	"time"

	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
)

// Entry is one order as the history shows it.
type Entry struct {
	UserID    string
	OrderID   string
	PlacedAt  time.Time
	UpdatedAt time.Time
	Status    order.Status
	Zone      string
	Total     money.Amount
	Items     []order.Item
}

// FromOrder builds the entry the projector stores.
func FromOrder(o order.Order) Entry {
	return Entry{UserID: o.UserID, OrderID: o.ID, PlacedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
		Status: o.Status, Zone: o.Zone, Total: o.Total, Items: o.Items}
}

// Repository stores entries. UpsertEntry is idempotent: applying the same entry twice leaves
// one row; (UserID, PlacedAt, OrderID) identifies it, so same-instant orders never collide.
type Repository interface {
	//dualwrite:write
	UpsertEntry(ctx context.Context, e Entry) error
	//dualwrite:read
	ListHistory(ctx context.Context, userID string, page paging.Request) (paging.Page[Entry], error)
}
