package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/migrate"
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
	// trace turns OpenTelemetry tracing on (tracing.Config.Enabled).
	trace tracing.Config
	// demo sizes the demo data seeded into an empty store (tests shrink or gate it).
	demo demo.Options
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
	var handler slog.Handler
	switch o.logFormat {
	case "text":
		handler = slog.NewTextHandler(stdio.Err, nil)
	case "json":
		handler = slog.NewJSONHandler(stdio.Err, nil)
	default:
		return fmt.Errorf("--log-format must be text or json, got %q", o.logFormat)
	}
	logger := slog.New(handler)
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Backends.Observe = httpapi.NewStoreObserver(reg) // every repository call, same op names on every backend
	cfg.Backends.CassandraMetrics = reg
	cfg.Backends.MongoMetrics = reg
	if o.statementMetrics {
		cfg.Backends.ObserveStatement = httpapi.NewStatementObserver(reg)
	}
	tr, err := tracing.Start(ctx, o.trace)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("tracing: flushing spans at shutdown", "err", err)
		}
	}()
	cfg.Backends.Tracer, cfg.Backends.Outcome = tr.Tracer(), httpapi.StoreOutcome
	var traces func() []tracing.Span
	if tr != nil {
		traces = tr.Recent.Spans
		logger.Info("tracing on", "sample_ratio", tr.Ratio, "otlp_export", tr.Exporting, "spans_kept", o.trace.Keep)
	}

	if cfg.Backends.Migrations {
		mirrorErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardmart_migration_mirror_errors_total",
			Help: "Changes the dual write could not copy to Cassandra (the old store committed them; verify lists the keys)."}, []string{"family"})
		reg.MustRegister(mirrorErrors)
		cfg.Backends.MigrationError = func(f placement.Family, key string, err error) {
			mirrorErrors.WithLabelValues(string(f)).Inc()
			logger.Error("dual write: change not copied to Cassandra; `shardmart migrate verify --repair` copies it", "family", f, "key", key, "err", err)
		}
	}
	s, err := shop.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
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
	if n := len(o.adminToken); n > 0 && n < minAdminTokenLen {
		logger.Warn("the admin token is short: anyone who guesses it can change prices, stock and orders; use at least 32 random characters",
			"length", n, "want_at_least", minAdminTokenLen)
	}
	if o.adminToken == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.adminToken = hex.EncodeToString(b[:])
		logger.Warn("no --admin-token / SHARDMART_ADMIN_TOKEN given: generated one for this run", "admin_token", o.adminToken)
	}

	// Background work stops before the stores close (deferred above, so it runs last).
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{}, 4)
	go func() { s.Projector.Run(bg, time.Second); done <- struct{}{} }()
	go func() { purge(bg, s, o.purgeEvery, o.backend.eventRetention, logger); done <- struct{}{} }()
	go func() { watchMigrations(bg, s, o.migrationPoll, logger); done <- struct{}{} }()
	go func() { s.FollowChanges(bg); done <- struct{}{} }()
	defer func() { stopBG(); <-done; <-done; <-done; <-done }()
	registerCacheMetrics(reg, s)
	registerLeaseMetrics(reg, s.Projector)

	// Seeding runs behind a listening server: /readyz says 503 with its progress until the
	// data is in, so an orchestrator routes no traffic yet while /healthz says the process lives.
	var seeding atomic.Pointer[string]
	if seedNow {
		msg := "seeding demo data"
		seeding.Store(&msg)
	}
	api := httpapi.New(httpapi.Deps{
		Services: s.API(), AdminToken: o.adminToken, Logger: logger, Registry: reg, Gatherer: reg, OutboxLag: s.Projector.Lag,
		Ready: s.Stores.Ready, Limits: o.limits(), SharedLimits: s.Stores.RateLimits, Following: s.CacheFollowing,
		Tracer: cfg.Backends.Tracer, Traces: traces,
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

// registerCacheMetrics exports how far this process's card cache is behind the outbox.
func registerCacheMetrics(reg prometheus.Registerer, s *shop.Shop) {
	if s.Tail == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardmart_card_cache_tail_behind_seconds",
			Help: "Time since this process's outbox tail last read every change (the card cache's staleness bound in effect)."},
			func() float64 { return s.Tail.State().Behind.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardmart_card_cache_bypassed",
			Help: "1 while search bypasses the card cache because the tail is too far behind (or failing), else 0."},
			func() float64 {
				if s.CacheFollowing() != nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shardmart_card_cache_tail_resets_total",
			Help: "Times the card cache was emptied because its tail found outbox rows pruned before it read them."},
			func() float64 { return float64(s.Tail.State().Resets) }),
	)
}

// registerLeaseMetrics exports this process's projector's drain leases (a shared outbox is
// drained by one process at a time; outbox/lease.go).
func registerLeaseMetrics(reg prometheus.Registerer, p *outbox.Projector) {
	counter := func(name, help string, v func(outbox.LeaseStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(p.LeaseStats())) })
	}
	reg.MustRegister(
		counter("shardmart_outbox_drain_lease_acquired_total", "Outbox drains this process ran under the shared drain lease.",
			func(st outbox.LeaseStats) int64 { return st.Acquired }),
		counter("shardmart_outbox_drain_lease_busy_total", "Drain attempts that found another process holding the lease (its drain did the work).",
			func(st outbox.LeaseStats) int64 { return st.Busy }),
		counter("shardmart_outbox_drain_lease_taken_over_total", "Leases this process took from a holder that let it expire (died or stalled mid-drain).",
			func(st outbox.LeaseStats) int64 { return st.TakenOver }),
	)
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

// watchMigrations applies the migration state every poll and heartbeats the applied phases
// under this process's writer id, until ctx ends. Without --migrations it returns at once.
func watchMigrations(ctx context.Context, s *shop.Shop, poll time.Duration, logger *slog.Logger) {
	phases := s.Stores.MigrationPhases()
	if len(phases) == 0 {
		return
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	writer := fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	logger.Info("following the migration state", "writer", writer, "phases", phases)
	if err := s.Stores.RefreshMigrations(ctx, writer); err != nil {
		logger.Warn("migration state", "err", err)
	}
	last := s.Stores.MigrationPhases()
	s.Stores.WatchMigrations(ctx, writer, poll, func(err error) { logger.Warn("migration state", "err", err) }, func(now map[placement.Family]migrate.Phase) {
		for f, p := range now {
			if last[f] != p {
				logger.Info("migration phase changed", "family", f, "from", last[f], "to", p)
			}
		}
		last = now
	})
}

// purge deletes expired sessions and guest carts (reads already hide them at once), events
// past the retention, and the outbox rows every consumer has passed.
func purge(ctx context.Context, s *shop.Shop, every, eventRetention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UTC()
		if n, err := s.Stores.Sessions.PurgeExpired(ctx, now); err != nil {
			logger.Warn("purge sessions", "err", err)
		} else if n > 0 {
			logger.Info("purged expired sessions", "count", n)
		}
		if n, err := s.Stores.Carts.PurgeExpired(ctx, now); err != nil {
			logger.Warn("purge guest carts", "err", err)
		} else if n > 0 {
			logger.Info("purged expired guest carts", "count", n)
		}
		if n, err := s.Stores.Events.PurgeEvents(ctx, event.Cutoff(now, eventRetention)); err != nil {
			logger.Warn("purge events", "err", err)
		} else if n > 0 {
			logger.Info("purged events past the retention", "count", n, "retention", eventRetention)
		}
		if res, err := outbox.Prune(ctx, s.Stores.Outbox, s.OutboxConsumers()); err != nil {
			logger.Warn("prune outbox", "err", err)
		} else if res.Deleted > 0 || res.Behind > 0 {
			// held_by names the consumer furthest behind: a stuck one keeps every row after it.
			logger.Info("pruned outbox", "deleted", res.Deleted, "kept_unconsumed", res.Behind, "held_by", res.HeldBy)
		}
	}
}
