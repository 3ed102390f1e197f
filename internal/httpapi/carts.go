package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/validation"
)

type cartItemView struct {
	ProductID string `json:"product_id"`
	Category  string `json:"category"`
	Quantity  int64  `json:"quantity"`
	// Name, unit price and line total are the catalog's as search shows them (the card cache's
	// staleness bound); checkout prices again from the store of record.
	Name      string        `json:"name,omitempty"`
	UnitPrice *money.Amount `json:"unit_price,omitempty"`
	LineTotal *money.Amount `json:"line_total,omitempty"`
	// Available is false when the product has left the catalog (the line is not in the subtotal).
	Available bool `json:"available"`
}

type cartView struct {
	Status    cart.Status    `json:"status"`
	Items     []cartItemView `json:"items"`
	Subtotal  money.Amount   `json:"subtotal"`
	ExpiresAt *time.Time     `json:"expires_at,omitempty"`
}

// lookupParallel caps the catalog reads one cart view runs at once: a cart holds up to
// cart.MaxItems lines, and a view should not take every connection of the pool.
const lookupParallel = 8

type lookup struct {
	p   catalog.Product
	err error
}

// lookupLines prices every line: from the card cache when it holds the product, as search
// would show it, else by a catalog read. The reads run concurrently: on a remote read model
// each is a round trip, and one after another they made most of a cart edit's time. One read
// runs inline, which keeps the embedded store's single-line edit free of goroutines.
func (s *server) lookupLines(ctx context.Context, items []cart.Item) []lookup {
	out := make([]lookup, len(items))
	missing := make([]int, 0, len(items))
	for i, it := range items {
		if s.Cards != nil {
			if p, ok := s.Cards.Card(it.ProductID); ok {
				out[i].p = p
				continue
			}
		}
		missing = append(missing, i)
	}
	if len(missing) == 1 {
		i := missing[0]
		out[i].p, out[i].err = s.Catalog.GetProduct(ctx, items[i].ProductID)
		return out
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, lookupParallel)
	for _, i := range missing {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].p, out[i].err = s.Catalog.GetProduct(ctx, items[i].ProductID)
		}()
	}
	wg.Wait()
	return out
}

// viewCart prices a cart's lines from the catalog. The first failed line in cart order is the
// error, as when the lines were read one after another.
func (s *server) viewCart(ctx context.Context, c cart.Cart) (cartView, error) {
	v := cartView{Status: c.Status, Items: make([]cartItemView, 0, len(c.Items))}
	if v.Status == "" {
		v.Status = cart.Active
	}
	if !c.ExpiresAt.IsZero() {
		v.ExpiresAt = &c.ExpiresAt
	}
	found := s.lookupLines(ctx, c.Items)
	for i, it := range c.Items {
		line := cartItemView{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity}
		p, err := found[i].p, found[i].err
		switch {
		case errors.Is(err, catalog.ErrNotFound):
		case err != nil:
			return v, fmt.Errorf("price cart line %s: %w", it.ProductID, err)
		default:
			total, err := p.Price.Mul(it.Quantity)
			if err == nil {
				v.Subtotal, err = v.Subtotal.Add(total)
			}
			if err != nil {
				return v, err
			}
			line.Name, line.UnitPrice, line.LineTotal, line.Available = p.Name, &p.Price, &total, true
		}
		v.Items = append(v.Items, line)
	}
	return v, nil
}

// cartView reads and prices the owner's active cart.
func (s *server) cartView(ctx context.Context, owner cart.Owner) (cartView, error) {
	c, err := s.Carts.Get(ctx, owner)
	if err != nil {
		return cartView{}, err
	}
	return s.viewCart(ctx, c)
}

func (s *server) getCart(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := s.cartView(r.Context(), c.owner())
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, v)
}

type quantityInput struct {
	Quantity int64 `json:"quantity"`
}

func (s *server) putCartItem(w http.ResponseWriter, r *http.Request, c *caller, in *quantityInput) error {
	id, err := pathID(r, "product_id")
	if err != nil {
		return err
	}
	// A guest cart expires with its session; the service ignores it for users.
	ct, err := s.Carts.Put(r.Context(), c.owner(), c.sess.ExpiresAt, id, in.Quantity)
	if errors.Is(err, catalog.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not found", "no such product: "+id,
			validation.FieldError{Field: "product_id", Detail: "no such product"})
	}
	if err != nil {
		return err
	}
	return s.sendCart(w, r, ct)
}

func (s *server) removeCartItem(w http.ResponseWriter, r *http.Request, c *caller) error {
	id, err := pathID(r, "product_id")
	if err != nil {
		return err
	}
	ct, err := s.Carts.Remove(r.Context(), c.owner(), id)
	if err != nil {
		return err
	}
	return s.sendCart(w, r, ct)
}

func (s *server) sendCart(w http.ResponseWriter, r *http.Request, ct cart.Cart) error {
	v, err := s.viewCart(r.Context(), ct)
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, v)
}
