package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/validation"
)

// CartSource is the one thing ordering needs from carts.
type CartSource interface {
	ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error)
}

// Syncer applies outbox follow-ups right after a commit so the caller reads its own writes;
// the background projector is what guarantees they happen.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Service places orders from carts (ORD-1).
type Service struct {
	Orders    Repository
	Carts     CartSource
	Projector Syncer
	Now       func() time.Time
	Logger    *slog.Logger
}

var keyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

const keyField, keyRule = "Idempotency-Key", "header is required: 1-128 printable ASCII characters"

// ValidateKey checks an Idempotency-Key header value.
func ValidateKey(key string) error {
	if !keyPattern.MatchString(key) {
		return validation.Field(keyField, keyRule)
	}
	return nil
}

// PlaceFromCart turns the user's active cart into an order. A repeated key returns the first
// order (created=false) whatever the cart holds now.
func (s *Service) PlaceFromCart(ctx context.Context, userID, zone, key string) (Order, bool, error) {
	var c validation.Collector
	c.Check(keyPattern.MatchString(key), keyField, keyRule)
	c.Check(catalog.ValidSlug(zone), "zone", "must be a zone slug such as \"eu-west\"")
	if err := c.Err(); err != nil {
		return Order{}, false, err
	}
	if o, err := s.Orders.ByIdempotencyKey(ctx, userID, key); err == nil {
		return replay(o, zone)
	} else if !errors.Is(err, ErrNotFound) {
		return Order{}, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	now := s.Now().UTC()
	owner := cart.User(userID)
	ct, err := s.Carts.ActiveCart(ctx, owner, now)
	if errors.Is(err, cart.ErrNotFound) || (err == nil && len(ct.Items) == 0) {
		return Order{}, false, ErrEmptyCart
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("read cart: %w", err)
	}
	lines := make([]Line, len(ct.Items))
	for i, it := range ct.Items {
		lines[i] = Line{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Order{}, false, err
	}
	o, created, err := s.Orders.Place(ctx, Placement{
		OrderID: id.String(), UserID: userID, CartID: ct.ID, CartOwner: owner.Key(),
		Zone: zone, IdempotencyKey: key, Lines: lines, At: now,
	})
	if err != nil {
		return Order{}, false, err
	}
	if !created { // a concurrent retry with the same key won the race
		return replay(o, zone)
	}
	if s.Projector != nil {
		if err := s.Projector.Sync(ctx); err != nil {
			s.logger().Warn("order committed; follow-ups deferred to the projector", "order", o.ID, "err", err)
		}
	}
	return o, created, nil
}

// replay answers a retry with the order its key placed, if the request is the same one.
func replay(o Order, zone string) (Order, bool, error) {
	if o.Zone != zone {
		return Order{}, false, fmt.Errorf("%w: it placed order %s in zone %s", ErrKeyReused, o.ID, o.Zone)
	}
	return o, false, nil
}

// Transition changes an order's status (admin) and applies follow-ups.
func (s *Service) Transition(ctx context.Context, id string, to Status) (Order, error) {
	o, err := s.Orders.Transition(ctx, id, to, s.Now().UTC())
	if err != nil {
		return Order{}, err
	}
	if s.Projector != nil {
		if err := s.Projector.Sync(ctx); err != nil {
			s.logger().Warn("status committed; follow-ups deferred to the projector", "order", o.ID, "err", err)
		}
	}
	return o, nil
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
