package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/tracing"
)

type serveOptions struct {
	backend         backendFlags
	addr            string
	adminToken      string
	seed            bool
	logFormat       string
	shutdownTimeout time.Duration
	purgeEvery      time.Duration
	migrationPoll   time.Duration
	// cacheStaleness bounds how far this process's card cache may lag the outbox.
	cacheStaleness time.Duration
	// statementMetrics adds the per-backend statement/command detail below the store operations.
	statementMetrics bool
	// bulkUsers enables POST /v1/admin/users (httpapi.Deps.BulkUsers).
	bulkUsers bool
	// trace turns OpenTelemetry tracing on (tracing.Config.Enabled).
	trace tracing.Config
	// demo sizes the demo data seeded into an empty store (tests shrink or gate it).
	demo demo.Options
	// opened, if not nil, is handed the shop once its stores are open (bench provisions its
	// users through them).
	opened func(*shop.Shop)
	// Per-minute rate limits (0: none); each allows a burst of half its rate.
	limitLoginClient, limitLoginAccount, limitSessionsClient, limitEventsSession, limitEventsClient, limitRegisterClient float64
}

// limits turns the per-minute flags into the API's limits.
func (o serveOptions) limits() httpapi.Limits {
	return httpapi.Limits{LoginPerClient: httpapi.PerMinute(o.limitLoginClient), LoginPerAccount: httpapi.PerMinute(o.limitLoginAccount),
		SessionsPerClient: httpapi.PerMinute(o.limitSessionsClient), EventsPerSession: httpapi.PerMinute(o.limitEventsSession),
		EventsPerClient: httpapi.PerMinute(o.limitEventsClient), RegisterPerClient: httpapi.PerMinute(o.limitRegisterClient)}
}

// newCmdServe builds `serve`; runF, if not nil, replaces runServe (tests).
func newCmdServe(stdio IO, runF func(context.Context, serveOptions) error) *cobra.Command {
	o := serveOptions{demo: demo.Defaults()}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API (embedded store under ./data by default; seeds demo data into an empty store)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.trace.RatioGiven = cmd.Flags().Changed("trace-sample-ratio")
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runServe(cmd.Context(), stdio, o, nil)
		},
	}
	o.backend.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", ":8080", "listen address")
	f.StringVar(&o.adminToken, "admin-token", "", "token for admin routes; empty: a random one is generated and logged")
	f.BoolVar(&o.seed, "seed", true, "seed demo data when the store is empty")
	f.BoolVar(&o.bulkUsers, "admin-bulk-users", false, "enable POST /v1/admin/users (admin token): many users with one password, hashed once; `bench --url` provisions its users through it")
	f.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long in-flight requests may run after SIGTERM")
	f.DurationVar(&o.purgeEvery, "purge-every", time.Minute, "how often expired sessions and guest carts are deleted")
	f.DurationVar(&o.migrationPoll, "migration-poll", 2*time.Second, "with --migrations: how often the migration state is read (a phase change reaches this process within it)")
	f.DurationVar(&o.cacheStaleness, "cache-staleness", shop.DefaultCacheStaleAfter, "how far behind the outbox this process's search cache may fall (its tail slowed or failing) before search reads the store and /readyz answers 503")
	f.BoolVar(&o.statementMetrics, "statement-metrics", true, "also export each Cassandra statement's and MongoDB command's latency (shardmart_store_statement_duration_seconds)")
	f.StringVar(&o.trace.Endpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this collector: a base URL, e.g. http://127.0.0.1:4318 (spans go to its /v1/traces), or a full traces URL; unset, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is used, and the exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS); needs a sampling ratio; off by default")
	f.Float64Var(&o.trace.SampleRatio, "trace-sample-ratio", 0, "fraction of requests traced (0..1, 0: off); not given, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose it (always_on, always_off, traceidratio, parentbased_*), and an OTLP endpoint with neither is an error; sampled traces are kept in memory for GET /v1/admin/traces and `bench`")
	f.IntVar(&o.trace.Keep, "trace-buffer", tracing.DefaultKeep, "spans of the most recent sampled traces kept in memory")
	d := httpapi.DefaultLimits()
	f.Float64Var(&o.limitLoginClient, "limit-login-client", d.LoginPerClient.PerMinute, "login attempts per minute per client address (0: no limit)")
	f.Float64Var(&o.limitLoginAccount, "limit-login-account", d.LoginPerAccount.PerMinute, "login attempts per minute per e-mail (0: no limit)")
	f.Float64Var(&o.limitSessionsClient, "limit-sessions-client", d.SessionsPerClient.PerMinute, "new sessions per minute per client address (0: no limit)")
	f.Float64Var(&o.limitEventsSession, "limit-events-session", d.EventsPerSession.PerMinute, "events posted per minute per session (0: no limit)")
	f.Float64Var(&o.limitEventsClient, "limit-events-client", d.EventsPerClient.PerMinute, "events posted per minute per client address, over all its sessions (0: no limit)")
	f.Float64Var(&o.limitRegisterClient, "limit-register-client", d.RegisterPerClient.PerMinute, "registrations per minute per client address, each a bcrypt hash (0: no limit)")
	fromEnv(f, "addr", "SHARDMART_ADDR")
	fromEnv(f, "admin-token", "SHARDMART_ADMIN_TOKEN")
	fromEnv(f, "log-format", "SHARDMART_LOG_FORMAT")
	return cmd
}

// minAdminTokenLen is the shortest admin token serve accepts without a warning: 32 characters
// of hex or base64 carry at least 128 bits when random.
const minAdminTokenLen = 32

// runServe serves until ctx ends, then shuts down gracefully. ready, if not nil, receives the
// bound address once the server accepts connections (tests).
func runServe(ctx context.Context, stdio IO, o serveOptions, ready chan<- string) error {
	logger, err := newLogger(o.logFormat, stdio.Err)
	if err != nil {
		return err
	}
	cfg, err := o.backend.config(logger)
	if err != nil {
		return err
	}
	if cfg.Placement.Uses(placement.SQLite) {
		release, err := lockDataDir(o.backend.dataDir)
		if err != nil {
			return err
		}
		defer release()
	}
	cfg.CacheStaleAfter = o.cacheStaleness
	reg, traces, stopTracing, err := observe(ctx, &cfg, o, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	s, err := shop.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if o.opened != nil {
		o.opened(s)
	}
	if o.demo.Products == 0 {
		o.demo = demo.Defaults()
	}
	seedNow := false
	if o.seed {
		empty, err := s.Empty(ctx)
		if err != nil {
			return err
		}
		seedNow = empty
	}
	o.adminToken = adminToken(o.adminToken, logger)

	// Background work stops before the stores close (deferred above, so it runs last).
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan error, 1)
	go func() {
		bgDone <- s.Run(bg, shop.RunOptions{PurgeEvery: o.purgeEvery, EventRetention: o.backend.eventRetention,
			MigrationPoll: o.migrationPoll, Logger: logger})
	}()
	defer func() { stopBG(); <-bgDone }()
	s.RegisterMetrics(reg)

	// Seeding runs behind a listening server: /readyz says 503 with its progress until the
	// data is in, so an orchestrator routes no traffic yet while /healthz says the process lives.
	var seeding atomic.Pointer[string]
	if seedNow {
		msg := "seeding demo data"
		seeding.Store(&msg)
	}
	api := newAPI(s, o, cfg.Backends.Tracer, logger, reg, traces, &seeding)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	limitsIn := "this process (the embedded store has one process)"
	if s.Stores.RateLimits != nil {
		limitsIn = "the " + cfg.Placement[placement.Orders] + " store, shared by every process"
	}
	logger.Info("serving", "addr", ln.Addr().String(), "placement", cfg.Placement.String(), "rate_limits_counted_in", limitsIn)
	serveCtx, stopServing := context.WithCancelCause(ctx)
	defer stopServing(nil)
	seedDone := make(chan struct{})
	if seedNow {
		go func() {
			defer close(seedDone)
			seedInBackground(serveCtx, s, o.demo, &seeding, logger, stopServing)
		}()
	} else {
		close(seedDone)
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	serveErr := httpapi.Serve(serveCtx, ln, api, o.shutdownTimeout, logger)
	<-seedDone // a shutdown ended the seed's context: it stops before the stores close
	if cause := context.Cause(serveCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if serveErr != nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	logger.Info("stopped")
	return nil
}

// seedInBackground seeds the demo data and clears the seeding state when done. A failure stops
// the server with the error; a shutdown interrupts it, leaving part of the data.
func seedInBackground(ctx context.Context, s *shop.Shop, opt demo.Options, seeding *atomic.Pointer[string],
	logger *slog.Logger, fail context.CancelCauseFunc) {
	logger.Info("empty store: seeding demo data; /readyz answers 503 until it is done (disable with --seed=false)")
	start := time.Now()
	observe := opt.OnProgress
	opt.OnProgress = func(stage string, done, total int) {
		msg := fmt.Sprintf("seeding demo data: %s %d/%d", stage, done, total)
		seeding.Store(&msg)
		if observe != nil {
			observe(stage, done, total)
		}
	}
	res, err := seedDemo(ctx, s, opt)
	if err != nil {
		if ctx.Err() != nil {
			logger.Warn("seeding interrupted by shutdown: the store holds part of the demo data and is not seeded again (start on an empty data directory to reseed)",
				"products", res.Products, "users", res.Users)
			return
		}
		fail(fmt.Errorf("seed demo data: %w", err))
		return
	}
	seeding.Store(nil)
	// Logged once, at seeding: the password is random per install, never published.
	logger.Info("demo data ready", "products", res.Products, "users", res.Users, "orders", res.Orders,
		"login", fmt.Sprintf("demo-0..%d@example.com", res.Users-1), "password", res.Password,
		"took", time.Since(start).Round(time.Millisecond))
}

// newAPI is the HTTP API over s: starting says how far seeding is while it runs.
func newAPI(s *shop.Shop, o serveOptions, tracer trace.Tracer, logger *slog.Logger, reg *prometheus.Registry,
	traces func() []tracing.Span, seeding *atomic.Pointer[string]) http.Handler {
	return httpapi.New(httpapi.Deps{
		Services: s.API(), AdminToken: o.adminToken, Logger: logger, Registry: reg, Gatherer: reg, OutboxLag: s.Projector.Lag,
		Ready: s.Stores.Ready, Limits: o.limits(), SharedLimits: s.Stores.RateLimits, Following: s.CacheFollowing,
		Tracer: tracer, Traces: traces, BulkUsers: o.bulkUsers,
		OutboxStats: func(ctx context.Context) (outbox.Stats, error) {
			return outbox.ReadStats(ctx, s.Stores.Outbox, s.OutboxConsumers())
		},
		Starting: func() string {
			if p := seeding.Load(); p != nil {
				return *p
			}
			return ""
		},
	})
}
