package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/tracing"
)

// newLogger is serve's structured logger on w, as --log-format names it.
func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// observe sets up the process's metrics registry and tracing and hooks both into cfg's
// backends: every repository call timed with the same op names on every backend, statements
// too with --statement-metrics, and the dual write's failed copies counted. stop flushes the
// spans at shutdown.
func observe(ctx context.Context, cfg *shop.Config, o serveOptions, logger *slog.Logger) (reg *prometheus.Registry, traces func() []tracing.Span, stop func(), err error) {
	reg = prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Backends.Observe = httpapi.NewStoreObserver(reg)
	cfg.Backends.CassandraMetrics = reg
	cfg.Backends.MongoMetrics = reg
	if o.statementMetrics {
		cfg.Backends.ObserveStatement = httpapi.NewStatementObserver(reg)
	}
	tr, err := tracing.Start(ctx, o.trace)
	if err != nil {
		return nil, nil, nil, err
	}
	stop = func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("tracing: flushing spans at shutdown", "err", err)
		}
	}
	cfg.Backends.Tracer, cfg.Backends.Outcome = tr.Tracer(), httpapi.StoreOutcome
	if tr != nil {
		traces = tr.Recent.Spans
		logger.Info("tracing on", "sample_ratio", tr.Ratio, "otlp_export", tr.Exporting, "spans_kept", o.trace.Keep)
	}
	if cfg.Backends.Migrations {
		mirrorErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shardmart_migration_mirror_errors_total",
			Help: "Changes the dual write could not copy to Cassandra (the old store committed them; verify lists the keys)."}, []string{"family"})
		reg.MustRegister(mirrorErrors)
		target := "Cassandra"
		if cfg.Backends.MigrationTarget == placement.Mongo {
			target = "MongoDB"
		}
		cfg.Backends.MigrationError = func(f placement.Family, key string, err error) {
			mirrorErrors.WithLabelValues(string(f)).Inc()
			logger.Error("dual write: change not copied to "+target+"; `shardmart migrate verify --repair` copies it", "family", f, "key", key, "err", err)
		}
	}
	return reg, traces, stop, nil
}

// adminToken is the token the admin routes take: the one given, with a warning when it is
// short, or a random one for this run, logged once.
func adminToken(given string, logger *slog.Logger) string {
	if n := len(given); n > 0 && n < minAdminTokenLen {
		logger.Warn("the admin token is short: anyone who guesses it can change prices, stock and orders; use at least 32 random characters",
			"length", n, "want_at_least", minAdminTokenLen)
	}
	if given != "" {
		return given
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	logger.Warn("no --admin-token / SHARDMART_ADMIN_TOKEN given: generated one for this run", "admin_token", token)
	return token
}
