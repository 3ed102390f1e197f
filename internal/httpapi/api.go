// Package httpapi is shardmart's HTTP API under /v1: JSON in and out, RFC 9457 problems for
// every error, bearer-token sessions, an admin token for catalog and order-status changes.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/store"
	"github.com/shardmart/shardmart/internal/tracing"
)

// Deps is everything the API needs; the serve command builds it.
type Deps struct {
	Services
	// AdminToken guards catalog writes and order-status changes (header X-Admin-Token).
	// Empty disables those routes (403) and New logs a warning.
	AdminToken string
	Logger     *slog.Logger
	// Registry receives the API's metrics (requests and latency per route).
	Registry prometheus.Registerer
	// Gatherer is what /metrics serves. Nil: Registry when it is a *prometheus.Registry,
	// else prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Ready reports whether the backends answer (for /readyz).
	Ready func(ctx context.Context) error
	// Starting, when set and returning a non-empty string, says the server is still starting
	// (seeding demo data): /readyz answers 503 with it as the problem's detail, so it must
	// carry nothing secret. Every route serves meanwhile; reads may see part of the data.
	Starting func() string
	// Following, when set and returning an error, says this process's search cache cannot
	// follow the changes made through other processes (search then reads the store):
	// /readyz answers 503 saying so.
	Following func() error
	// OutboxLag, when set, is exported as the shardmart_outbox_lag_messages gauge
	// (pass (*outbox.Projector).Lag).
	OutboxLag func(ctx context.Context) (int64, error)
	// OutboxStats, when set, is exported as shardmart_outbox_rows and
	// shardmart_outbox_oldest_unconsumed_age_seconds (pass outbox.ReadStats for the consumers).
	OutboxStats func(ctx context.Context) (outbox.Stats, error)
	// Limits rate-limit logins, registrations, session creation and event posting; zero: none.
	Limits Limits
	// SharedLimits, when set, counts Limits over every process of the shop (a store they all
	// use); nil counts them in this process.
	SharedLimits SharedLimiter
	// Now is the clock for events and rate limits; nil means time.Now.
	Now func() time.Time
	// RequestTimeout is each request's deadline: the store call of a request caught on a
	// database member that froze or was cut off gives up and answers 503 with Retry-After
	// (a retry reaches the new primary) instead of hanging with the member. Zero means
	// DefaultRequestTimeout, negative none.
	RequestTimeout time.Duration
	// Tracer, when set, traces the requests it samples: a span per request, named by its
	// route, around the spans of the service and store calls it makes. Nil: no span code runs.
	Tracer trace.Tracer
	// Traces, when set, returns the recent sampled spans GET /v1/admin/traces serves
	// (admin token); nil answers 404 there.
	Traces func() []tracing.Span
	// BulkUsers enables POST /v1/admin/users, which creates many users with one password
	// (serve --admin-bulk-users); off, it answers 404.
	BulkUsers bool
}

// DefaultRequestTimeout is longer than any healthy request (milliseconds) and than a failover
// on tuned settings, shorter than a client's patience.
const DefaultRequestTimeout = 10 * time.Second

// access is who may call a route.
type access int

const (
	accPublic  access = iota // anyone
	accSession               // a live session (guest or user)
	accUser                  // a session bound to a user
	accAdmin                 // the admin token
)

// handlerFunc handles one route for an authenticated caller; a returned error becomes a problem.
type handlerFunc func(s *server, w http.ResponseWriter, r *http.Request, c *caller) error

// withBody adapts a handler that takes the strictly decoded JSON body (decodeBody) as *T, so
// no handler decodes for itself.
func withBody[T any](h func(s *server, w http.ResponseWriter, r *http.Request, c *caller, in *T) error) handlerFunc {
	return withBodyUpTo(MaxBodyBytes, h)
}

// withBodyUpTo is withBody with a body of at most limit bytes.
func withBodyUpTo[T any](limit int, h func(s *server, w http.ResponseWriter, r *http.Request, c *caller, in *T) error) handlerFunc {
	return func(s *server, w http.ResponseWriter, r *http.Request, c *caller) error {
		in := new(T)
		if err := decodeBodyUpTo(r, in, limit); err != nil {
			return err
		}
		return h(s, w, r, c, in)
	}
}

// route is one row of THE route table: the mux, the OpenAPI test and the metrics labels all
// read it, so the three can never disagree.
type route struct {
	method string
	path   string // ServeMux pattern path, which is also the OpenAPI path template
	access access
	handle handlerFunc
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

// routes lists every endpoint.
var routes = []route{
	{"GET", "/healthz", accPublic, (*server).healthz},
	{"GET", "/readyz", accPublic, (*server).readyz},
	{"GET", "/metrics", accPublic, (*server).metricsHandler},
	{"GET", "/openapi.json", accPublic, (*server).openapi},

	{"POST", "/v1/sessions", accPublic, (*server).startSession},
	{"POST", "/v1/users", accSession, withBody((*server).register)},
	{"POST", "/v1/login", accSession, withBody((*server).login)},
	{"POST", "/v1/logout", accSession, (*server).logout},

	{"GET", "/v1/products", accPublic, (*server).searchProducts},
	{"GET", "/v1/products/{id}", accPublic, (*server).getProduct},
	{"POST", "/v1/products", accAdmin, withBody((*server).createProduct)},
	{"PATCH", "/v1/products/{id}", accAdmin, withBody((*server).patchProduct)},
	{"POST", "/v1/products/{id}/stock", accAdmin, withBody((*server).adjustStock)},

	{"GET", "/v1/cart", accSession, (*server).getCart},
	{"PUT", "/v1/cart/items/{product_id}", accSession, withBody((*server).putCartItem)},
	{"DELETE", "/v1/cart/items/{product_id}", accSession, (*server).removeCartItem},

	{"POST", "/v1/orders", accUser, withBody((*server).placeOrder)},
	{"GET", "/v1/orders", accUser, (*server).listOrders},
	{"GET", "/v1/orders/{id}", accUser, (*server).getOrder},
	{"POST", "/v1/orders/{id}/status", accAdmin, withBody((*server).transitionOrder)},

	{"POST", "/v1/events", accSession, withBody((*server).appendEvent)},
	{"GET", "/v1/events", accSession, (*server).listEvents},

	{"GET", "/v1/admin/traces", accAdmin, (*server).traces},
	{"POST", "/v1/admin/users", accAdmin, withBodyUpTo(MaxBulkBodyBytes, (*server).bulkUsers)},
}

type server struct {
	Deps
	limits  limiters
	log     *slog.Logger
	metrics *httpMetrics
	promh   http.Handler
}

// New returns the API handler.
func New(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.RequestTimeout == 0 {
		d.RequestTimeout = DefaultRequestTimeout
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Gatherer == nil {
		if g, ok := d.Registry.(prometheus.Gatherer); ok {
			d.Gatherer = g
		} else {
			d.Gatherer = prometheus.DefaultGatherer
		}
	}
	if d.Tracer != nil {
		d.Services = traceServices(d.Services, d.Tracer)
	}
	s := &server{Deps: d, log: d.Logger, limits: newLimiters(d.Limits, d.SharedLimits, d.Now)}
	s.metrics = newHTTPMetrics(d.Registry)
	if d.OutboxLag != nil {
		registerOrReuse(d.Registry, &lagCollector{lag: d.OutboxLag, log: d.Logger})
	}
	if d.OutboxStats != nil {
		registerOrReuse(d.Registry, &outboxCollector{stats: d.OutboxStats, now: d.Now, log: d.Logger})
	}
	s.promh = promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{ErrorLog: slogErrorLog{d.Logger}})
	if d.AdminToken == "" {
		d.Logger.Warn("no admin token configured: admin routes (catalog writes, order status) answer 403")
	}

	mux := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range routes {
		mux.Handle(rt.pattern(), s.wrap(rt.pattern(), rt.access, rt.handle))
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	// A known path with another method is a 405 problem with Allow; a method-less pattern is
	// less specific than the routes above, so it only catches what they do not.
	for path, methods := range allowed {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		mux.Handle(path, s.wrap("method_not_allowed", accPublic, func(_ *server, w http.ResponseWriter, _ *http.Request, _ *caller) error {
			w.Header().Set("Allow", allow)
			return problem(http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed", "allowed: "+allow)
		}))
	}
	unmatched := s.wrap("unmatched", accPublic, func(*server, http.ResponseWriter, *http.Request, *caller) error {
		return errNotFound
	})
	mux.Handle("/", unmatched)
	return s.front(mux, unmatched)
}

// MaxHeaderBytes bounds a request's header fields (names, values and request line): past it
// the answer is a 431 problem. Serve gives net/http a far larger limit (serverHeaderBytes)
// because net/http answers its own in plain text before any handler runs.
const MaxHeaderBytes = 64 << 10

// front answers, as problems, the requests ServeMux would answer itself: a path that is not
// in canonical form ("//", "/./", "/../") gets a 404 where ServeMux would send a redirect with an
// HTML body, and header fields past MaxHeaderBytes a 431.
func (s *server) front(mux *http.ServeMux, unmatched http.Handler) http.Handler {
	tooLarge := s.wrap("header_too_large", accPublic, func(*server, http.ResponseWriter, *http.Request, *caller) error {
		return problem(http.StatusRequestHeaderFieldsTooLarge, "header-too-large", "Request header fields too large",
			fmt.Sprintf("the request line and header fields must be at most %d bytes", MaxHeaderBytes))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case headerBytes(r) > MaxHeaderBytes:
			tooLarge.ServeHTTP(w, r)
		case r.Method != http.MethodConnect && !canonicalPath(r.URL.EscapedPath()):
			unmatched.ServeHTTP(w, r)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}

// canonicalPath is ServeMux's own test for a redirect (its cleanPath): path.Clean changes
// nothing but a trailing slash.
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// headerBytes approximates the request's size on the wire the way net/http's limit counts it.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len(r.Host) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // ": " and CRLF
		}
	}
	return n
}

// wrap adds, around one route: request id, panic recovery, authentication, error rendering,
// the access log line and the per-route metrics.
func (s *server) wrap(label string, acc access, h handlerFunc) http.Handler {
	obs := s.metrics.forRoute(label)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, id := withRequestID(r.Context())
		if s.RequestTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.RequestTimeout)
			defer cancel()
		}
		var span trace.Span
		if s.Tracer != nil && label != tracesRoute {
			ctx, span = startRequestSpan(ctx, s.Tracer, label, r)
		}
		r = r.WithContext(ctx)
		rec := &statusRecorder{ResponseWriter: w}
		rec.Header().Set("X-Request-Id", id)
		aborted := false
		if span != nil {
			// Registered before the recovery below, so it also runs when that re-panics: a root
			// left open would hold its children pending and export nothing.
			defer func() { endRequestSpan(span, rec.status, aborted) }()
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					aborted = true
					panic(v)
				}
				s.log.Error("panic in handler", "route", label, "request_id", id, "panic", v)
				if rec.status == 0 {
					writeProblem(rec, r, problem(http.StatusInternalServerError, "internal", "Internal error", "internal error"))
				}
			}
			d := time.Since(start)
			obs.observe(rec.status, d)
			s.log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", r.Method),
				slog.String("route", label), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
				slog.Duration("duration", d), slog.String("request_id", id))
		}()
		c, err := s.authenticate(r, acc)
		if err == nil {
			err = h(s, rec, r, c)
		}
		if err != nil {
			s.fail(rec, r, label, err)
		}
	})
}

// fail renders err as a problem; internal causes are logged with the request id, not sent.
func (s *server) fail(w http.ResponseWriter, r *http.Request, label string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() == nil {
		// Cancelled inside a backend's client while the caller still waits (an operation
		// interrupted when its connection pool was cleared in a failover): a transient state,
		// answered with Retry-After like the others, not as a client that went away.
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	p, internal := toProblem(err)
	if internal {
		// The status is logged: a 503's cause (store.ErrUnavailable) is logged at this level
		// too, and without it a fault run's 503s read as 500s.
		s.log.Error("request failed", "route", label, "status", p.Status, "request_id", requestID(r.Context()), "err", err)
	}
	writeProblem(w, r, p)
}

// statusRecorder remembers the status for logs and metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (flush, deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *server) healthz(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	return reply(w, http.StatusOK, map[string]string{"status": "ok"})
}

// downBackends is a readiness error that names the backends that did not answer
// (placement.DownError).
type downBackends interface {
	error
	Backends() []string
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if s.Starting != nil {
		if detail := s.Starting(); detail != "" {
			return problem(http.StatusServiceUnavailable, "not-ready", "Not ready", detail)
		}
	}
	if s.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.Ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err)
			// The backend's name, not its error: the error may carry addresses.
			detail := "a backend does not answer"
			var down downBackends
			if errors.As(err, &down) {
				detail = "not answering: " + strings.Join(down.Backends(), ", ")
			}
			return problem(http.StatusServiceUnavailable, "not-ready", "Not ready", detail)
		}
	}
	if s.Following != nil {
		if err := s.Following(); err != nil {
			s.log.Warn("not ready", "err", err)
			return problem(http.StatusServiceUnavailable, "not-ready", "Not ready",
				"the search cache is not following the outbox; search reads the store meanwhile")
		}
	}
	return reply(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) metricsHandler(w http.ResponseWriter, r *http.Request, _ *caller) error {
	s.promh.ServeHTTP(w, r)
	return nil
}
