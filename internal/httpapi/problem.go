package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store"
	"github.com/shardmart/shardmart/internal/validation"
)

// problemBase prefixes every problem type URI; the suffix names the class of error.
const problemBase = "https://shardmart.dev/problems/"

// Problem is an RFC 9457 problem detail. Extension members (errors, product_id, ...) are
// plain fields so a client can rely on their names.
type Problem struct {
	Type      string                  `json:"type"`
	Title     string                  `json:"title"`
	Status    int                     `json:"status"`
	Detail    string                  `json:"detail,omitempty"`
	Instance  string                  `json:"instance,omitempty"`
	Errors    []validation.FieldError `json:"errors,omitempty"`
	RequestID string                  `json:"request_id,omitempty"`
	// Stock conflicts (ORD-1, stock adjustments) name the item that is short.
	ProductID string `json:"product_id,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Requested *int64 `json:"requested,omitempty"`
	Available *int64 `json:"available,omitempty"`
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter string `json:"-"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

// problem builds a problem whose type is problemBase+kind.
func problem(status int, kind, title, detail string, fields ...validation.FieldError) *Problem {
	return &Problem{Type: problemBase + kind, Title: title, Status: status, Detail: detail, Errors: fields}
}

// badRequest is a 400 naming one field.
func badRequest(field, detail string) *Problem {
	return problem(http.StatusBadRequest, "validation", "Invalid request", field+" "+detail,
		validation.FieldError{Field: field, Detail: detail})
}

var (
	errUnauthenticated = problem(http.StatusUnauthorized, "unauthenticated", "Authentication required",
		"send Authorization: Bearer <token> from POST /v1/sessions")
	errLoginRequired = problem(http.StatusForbidden, "login-required", "Login required",
		"this operation needs a session bound to a user: POST /v1/login")
	errAdminMissing = problem(http.StatusUnauthorized, "admin-token-required", "Admin token required",
		"send the X-Admin-Token header")
	errAdminWrong = problem(http.StatusForbidden, "admin-token-invalid", "Forbidden", "the admin token is not valid")
	errAdminOff   = problem(http.StatusForbidden, "admin-disabled", "Forbidden",
		"admin operations are disabled: the server has no admin token configured")
	errNotFound = problem(http.StatusNotFound, "not-found", "Not found", "no such resource")
)

// StatusOf is the HTTP status the API answers err with: the fault suites that drive the
// services without HTTP use it to hold every error they meet to "never a 500".
func StatusOf(err error) int {
	p, _ := toProblem(err)
	return p.Status
}

// toProblem maps a domain or decoding error to the problem the client sees. Anything it does
// not recognise is a 500 whose cause is logged, never sent.
func toProblem(err error) (p *Problem, internal bool) {
	var pr *Problem
	if errors.As(err, &pr) {
		cp := *pr
		return &cp, false
	}
	var short *catalog.InsufficientStockError
	if errors.As(err, &short) {
		cp := problem(http.StatusConflict, "insufficient-stock", "Insufficient stock", short.Error(),
			validation.FieldError{Field: "items", Detail: fmt.Sprintf("product %s: requested %d, available %d in zone %s",
				short.ProductID, short.Requested, short.Available, short.Zone)})
		cp.ProductID, cp.Zone = short.ProductID, short.Zone
		cp.Requested, cp.Available = &short.Requested, &short.Available
		return cp, false
	}
	var full *catalog.StockCapError
	if errors.As(err, &full) {
		cp := problem(http.StatusConflict, "stock-cap", "Stock cap exceeded", full.Error(),
			validation.FieldError{Field: "delta", Detail: fmt.Sprintf("would take the stock in zone %s past %d (it holds %d)",
				full.Zone, int64(catalog.MaxStock), full.Level)})
		cp.ProductID, cp.Zone = full.ProductID, full.Zone
		cp.Requested, cp.Available = &full.Delta, &full.Level
		return cp, false
	}
	if fields, ok := validation.Fields(err); ok {
		detail := "invalid input"
		if len(fields) > 0 {
			detail = fields[0].Field + " " + fields[0].Detail
		}
		return problem(http.StatusBadRequest, "validation", "Invalid request", detail, fields...), false
	}
	// A backend's transient state (a failover, an election, an outcome the store could not learn,
	// a quorum not reached in time, a store timeout) is retried by the client, not reported as a
	// server fault. Placement makes every such error a store.UnavailableError (placement.transient).
	if errors.Is(err, store.ErrUnavailable) {
		return unavailable(err), true
	}
	switch {
	case errors.Is(err, catalog.ErrNotFound), errors.Is(err, order.ErrNotFound):
		return problem(http.StatusNotFound, "not-found", "Not found", err.Error()), false
	case errors.Is(err, catalog.ErrExists):
		return problem(http.StatusConflict, "exists", "Already exists", err.Error(),
			validation.FieldError{Field: "id", Detail: "a product with this id exists"}), false
	case errors.Is(err, order.ErrIllegalTransition):
		return problem(http.StatusConflict, "illegal-transition", "Illegal status transition", err.Error(),
			validation.FieldError{Field: "status", Detail: err.Error()}), false
	case errors.Is(err, order.ErrEmptyCart):
		return problem(http.StatusConflict, "empty-cart", "Cart is empty", "add items to the cart before ordering",
			validation.FieldError{Field: "items", Detail: "cart is empty"}), false
	case errors.Is(err, order.ErrKeyReused):
		return problem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused", err.Error(),
			validation.FieldError{Field: "Idempotency-Key", Detail: "was already used with a different request"}), false
	case errors.Is(err, cart.ErrCheckoutInProgress):
		// Retry-After: a checkout ends within its lease, normally within milliseconds.
		return problem(http.StatusConflict, "checkout-in-progress", "Checkout in progress",
			"an order is being placed from this cart; it cannot change until that ends (retry shortly)",
			validation.FieldError{Field: "cart", Detail: "checkout in progress"}), false
	case errors.Is(err, cart.ErrProductInactive):
		return problem(http.StatusConflict, "product-inactive", "Product not on sale", err.Error(),
			validation.FieldError{Field: "product_id", Detail: "is not on sale"}), false
	case errors.Is(err, cart.ErrGuestMerged):
		return problem(http.StatusConflict, "cart-merged", "Cart merged at login", err.Error(),
			validation.FieldError{Field: "cart", Detail: "use the token the login returned"}), false
	case errors.Is(err, order.ErrCartAlreadyOrdered), errors.Is(err, cart.ErrNotActive):
		return problem(http.StatusConflict, "cart-ordered", "Cart already ordered", err.Error()), false
	case errors.Is(err, account.ErrEmailTaken):
		return problem(http.StatusConflict, "email-taken", "Email already registered", err.Error(),
			validation.FieldError{Field: "email", Detail: "is already registered"}), false
	case errors.Is(err, account.ErrBadCredentials):
		return problem(http.StatusUnauthorized, "bad-credentials", "Login failed", account.ErrBadCredentials.Error()), false
	case errors.Is(err, session.ErrNotFound):
		return errUnauthenticated, false
	case errors.Is(err, session.ErrBoundToOtherUser):
		return problem(http.StatusConflict, "session-bound", "Session belongs to another user",
			"log out (start a new session) before logging in as another user"), false
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this answer and nothing is wrong with the server.
		return problem(http.StatusServiceUnavailable, "cancelled", "Request cancelled", "the request was cancelled"), false
	case errors.Is(err, context.DeadlineExceeded):
		// The request's deadline (a backend too slow or between primaries): worth a retry.
		p := problem(http.StatusServiceUnavailable, "timeout", "Service unavailable", "the request timed out; retry after 1 s")
		p.RetryAfter = "1"
		return p, true
	}
	return problem(http.StatusInternalServerError, "internal", "Internal error", "internal error"), true
}

// unavailable answers a backend's transient state (a failover, an election, a write concern
// timeout): 503 with Retry-After in whole seconds, at least one. The detail names the family,
// the backend and the state with its level ("carts on cassandra: write at QUORUM timed out
// ..."). The request may be retried as it is; an order's retry with the same Idempotency-Key
// never places a second order.
func unavailable(err error) *Problem {
	reason, wait := "the store could not complete the request", time.Second
	var ue *store.UnavailableError
	if errors.As(err, &ue) {
		reason, wait = ue.Describe(), max(ue.RetryAfter, time.Second)
	}
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	p := problem(http.StatusServiceUnavailable, "unavailable", "Service unavailable",
		"the database is briefly unavailable: "+reason+"; retry after "+secs+" s (an order with the same Idempotency-Key)")
	p.RetryAfter = secs
	return p
}

// writeProblem renders p; instance is the request path and request_id ties it to the log line.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	p.RequestID = requestID(r.Context())
	if p.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shardmart"`)
	}
	if p.RetryAfter != "" {
		w.Header().Set("Retry-After", p.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}
