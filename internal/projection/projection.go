// Package projection applies the outbox's cross-store follow-ups: an ordered cart is marked
// ordered (CRT-6) and the order-history read model is updated (ORD-2, HIS-1), wherever those
// families live. Every handler is idempotent, so a replay after a crash changes nothing.
package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// Consumer is the checkpoint name of the main projector.
const Consumer = "projector"

// CartMarker is the cart side of an order.
type CartMarker interface {
	MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error
}

// CatalogSink receives product changes for a catalog read model kept in another store (CAT-1).
type CatalogSink interface {
	UpsertProduct(ctx context.Context, p catalog.Product) error
}

// Targets are the stores follow-ups go to; Catalog may be nil when the catalog is read from
// the transactional store itself.
type Targets struct {
	Carts   CartMarker
	History history.Repository
	Catalog CatalogSink
}

// Register installs the handlers on p.
func Register(p *outbox.Projector, t Targets) {
	p.Handle(outbox.TopicOrderPlaced, func(ctx context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		if err := t.Carts.MarkOrdered(ctx, cart.User(o.UserID), o.CartID, o.ID, o.CreatedAt); err != nil {
			return fmt.Errorf("mark cart %s ordered: %w", o.CartID, err)
		}
		return t.History.UpsertEntry(ctx, history.FromOrder(o))
	})
	p.Handle(outbox.TopicOrderStatus, func(ctx context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		return t.History.UpsertEntry(ctx, history.FromOrder(o))
	})
	if t.Catalog != nil {
		p.Handle(outbox.TopicProductChanged, func(ctx context.Context, m outbox.Message) error {
			var pr catalog.Product
			if err := json.Unmarshal(m.Payload, &pr); err != nil {
				return fmt.Errorf("decode product #%d: %w", m.Seq, err)
			}
			return t.Catalog.UpsertProduct(ctx, pr)
		})
	}
}

func decodeOrder(m outbox.Message) (order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(m.Payload, &o); err != nil {
		return o, fmt.Errorf("decode order #%d: %w", m.Seq, err)
	}
	return o, nil
}
