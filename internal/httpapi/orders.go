package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/validation"
)

// orderView is an order as its owner sees it; the idempotency key and cart id stay inside.
type orderView struct {
	ID        string       `json:"id"`
	Status    order.Status `json:"status"`
	Zone      string       `json:"zone"`
	Items     []order.Item `json:"items"`
	Total     money.Amount `json:"total"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}

func viewOrder(o order.Order) orderView {
	return orderView{ID: o.ID, Status: o.Status, Zone: o.Zone, Items: o.Items, Total: o.Total,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

func viewEntry(e history.Entry) orderView {
	return orderView{ID: e.OrderID, Status: e.Status, Zone: e.Zone, Items: e.Items, Total: e.Total,
		CreatedAt: e.PlacedAt, UpdatedAt: e.UpdatedAt}
}

type placeInput struct {
	Zone string `json:"zone"`
}

// IdempotencyKeyHeader makes POST /v1/orders safe to retry.
const IdempotencyKeyHeader = "Idempotency-Key"

// placeOrder is ORD-1: 201 for a new order; a replayed key answers 200 with the first order.
func (s *server) placeOrder(w http.ResponseWriter, r *http.Request, c *caller, in *placeInput) error {
	key := r.Header.Get(IdempotencyKeyHeader)
	o, created, err := s.Orders.PlaceFromCart(r.Context(), c.sess.UserID, in.Zone, key)
	if errors.Is(err, catalog.ErrNotFound) {
		// A cart line whose product left the catalog: the order conflicts with the cart, the
		// route itself exists.
		return problem(http.StatusConflict, "product-unavailable", "Product unavailable", err.Error(),
			validation.FieldError{Field: "items", Detail: err.Error()})
	}
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if created {
		w.Header().Set("Location", "/v1/orders/"+o.ID)
	} else {
		status = http.StatusOK
		w.Header().Set("Idempotency-Replayed", "true")
	}
	return reply(w, status, viewOrder(o))
}

func (s *server) listOrders(w http.ResponseWriter, r *http.Request, c *caller) error {
	var vc validation.Collector
	req := pageParams(r.URL.Query(), &vc)
	if err := vc.Err(); err != nil {
		return err
	}
	req, err := req.Normalize()
	if err != nil {
		return err
	}
	page, err := s.History.ListHistory(r.Context(), c.sess.UserID, req)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, listOf(page, viewEntry))
}

// getOrder answers 404 for another user's order, exactly as for a missing one, so order ids
// leak nothing.
func (s *server) getOrder(w http.ResponseWriter, r *http.Request, c *caller) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	o, err := s.Orders.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if o.UserID != c.sess.UserID {
		return order.ErrNotFound
	}
	return reply(w, http.StatusOK, viewOrder(o))
}

type statusInput struct {
	Status string `json:"status"`
}

// transitionOrder is ORD-3's admin side; an edge outside the state machine is a 409.
func (s *server) transitionOrder(w http.ResponseWriter, r *http.Request, _ *caller, in *statusInput) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	to, ok := order.ParseStatus(in.Status)
	if !ok {
		return validation.Field("status", "must be one of created, paid, shipped, delivered, cancelled")
	}
	o, err := s.Orders.Transition(r.Context(), id, to)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, viewOrder(o))
}
