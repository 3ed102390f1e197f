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

// Checkouts is what ordering needs from carts: freeze the user's cart for one checkout, and
// release it when that checkout failed for certain (cart.Service implements it).
type Checkouts interface {
	BeginCheckout(ctx context.Context, owner cart.Owner, orderID string) (cart.Cart, error)
	EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string) error
}

// Syncer waits until every outbox follow-up committed before the call is applied.
type Syncer interface {
	Sync(ctx context.Context) error
}

// FollowUps applies the follow-ups of one order event the caller just committed (the cart
// ordered, the buyer's history, the catalog's stock), that event's alone: an order never waits
// on another user's. The background projector applies whatever a caller did not finish.
type FollowUps interface {
	Placed(ctx context.Context, o Order) error
	StatusChanged(ctx context.Context, o Order) error
}

// Service places orders from carts (ORD-1).
type Service struct {
	Orders    Repository
	Carts     Checkouts
	FollowUps FollowUps
	// SyncWait bounds how long an order or a status change waits for its follow-ups before it
	// answers (they are committed with it, and the projector applies them in any case); 0 is
	// DefaultSyncWait.
	SyncWait time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// DefaultSyncWait: follow-ups take milliseconds; seconds mean a follow-up's store is sick (a
// node frozen or restarting), and the order, already placed, must not wait on it.
const DefaultSyncWait = 1500 * time.Millisecond

// followUp applies the follow-ups of the event the caller committed, waiting at most SyncWait;
// past it, or on an error, the projector applies them.
func (s *Service) followUp(ctx context.Context, what string, o Order, apply func(context.Context, Order) error) {
	wait := s.SyncWait
	if wait <= 0 {
		wait = DefaultSyncWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := apply(ctx, o); err != nil {
		s.logger().Warn(what+" committed; follow-ups deferred to the projector", "order", o.ID, "err", err)
	}
}

var keyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

const keyField, keyRule = "Idempotency-Key", "header is required: 1-128 printable ASCII characters"

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
	id, err := uuid.NewV7()
	if err != nil {
		return Order{}, false, err
	}
	// The cart is frozen before it is read: a change racing with this checkout either lands
	// before the freeze (and is in the order) or is refused until the checkout ends.
	owner := cart.User(userID)
	ct, err := s.Carts.BeginCheckout(ctx, owner, id.String())
	// Another checkout holds the cart: most often a retry of this very request racing with
	// the first attempt. Wait briefly for it to end; answer with its order if the key placed
	// one, else take the cart once it is free.
	for pause, waited := 5*time.Millisecond, time.Duration(0); errors.Is(err, cart.ErrCheckoutInProgress) && waited < checkoutWait; waited += pause {
		if o, kerr := s.Orders.ByIdempotencyKey(ctx, userID, key); kerr == nil {
			return replay(o, zone)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return Order{}, false, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
		ct, err = s.Carts.BeginCheckout(ctx, owner, id.String())
	}
	if errors.Is(err, cart.ErrNotFound) {
		// No cart: perhaps a concurrent request with this key ordered it meanwhile.
		if o, kerr := s.Orders.ByIdempotencyKey(ctx, userID, key); kerr == nil {
			return replay(o, zone)
		}
		return Order{}, false, ErrEmptyCart
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("begin checkout: %w", err)
	}
	lines := make([]Line, len(ct.Items))
	for i, it := range ct.Items {
		lines[i] = Line{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity}
	}
	p := Placement{OrderID: id.String(), UserID: userID, CartID: ct.ID, CartOwner: owner.Key(),
		Zone: zone, IdempotencyKey: key, Lines: lines, At: s.Now().UTC()}
	var o Order
	var created bool
	if err = ValidatePlacement(p); err == nil {
		placeCtx, cancel := context.WithTimeout(ctx, CheckoutPlaceTimeout)
		o, created, err = s.Orders.Place(placeCtx, p)
		cancel()
	}
	if err != nil {
		if definite(err) {
			if rerr := s.Carts.EndCheckout(ctx, owner, ct.ID, id.String()); rerr != nil {
				s.logger().Warn("checkout failed; the cart stays frozen until its lease ends", "cart", ct.ID, "err", rerr)
			}
		}
		return Order{}, false, err
	}
	if !created || o.ID != id.String() {
		// A concurrent retry with the same key won the race: this checkout placed nothing.
		if rerr := s.Carts.EndCheckout(ctx, owner, ct.ID, id.String()); rerr != nil {
			s.logger().Warn("release after a replayed key failed; the lease will end it", "cart", ct.ID, "err", rerr)
		}
	}
	if !created { // a concurrent retry with the same key won the race
		return replay(o, zone)
	}
	if s.FollowUps != nil {
		s.followUp(ctx, "order", o, s.FollowUps.Placed)
	}
	return o, created, nil
}

// checkoutWait is how long a checkout waits for another one holding the same cart (a
// concurrent retry) before answering checkout-in-progress; a checkout takes milliseconds.
const checkoutWait = 2 * time.Second

// CheckoutPlaceTimeout bounds the order store's part of a checkout, well inside
// cart.CheckoutLease, so a lease never runs out while a commit is still being decided.
const CheckoutPlaceTimeout = cart.CheckoutLease / 3

// nothingCommitted is a store error that knows its operation took no effect although its
// outcome is open (store.UnavailableError after an aborted transaction): a retry decides it,
// and that retry needs the cart.
type nothingCommitted interface{ NothingCommitted() bool }

// definite reports whether a failed Place certainly committed nothing, so the cart can be
// released at once. Anything else (a timeout, a lost connection) may have committed: the cart
// stays frozen and the lease, then FenceCart, decide.
func definite(err error) bool {
	var short *catalog.InsufficientStockError
	var verr *validation.Error
	var nc nothingCommitted
	return errors.As(err, &short) || errors.As(err, &verr) || errors.Is(err, catalog.ErrNotFound) ||
		errors.Is(err, ErrEmptyCart) || (errors.As(err, &nc) && nc.NothingCommitted())
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
	if s.FollowUps != nil {
		s.followUp(ctx, "status", o, s.FollowUps.StatusChanged)
	}
	return o, nil
}

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Get reads one order (its owner check is the caller's).
func (s *Service) Get(ctx context.Context, id string) (Order, error) {
	return s.Orders.GetOrder(ctx, id)
}
