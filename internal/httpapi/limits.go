package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/ratelimit"
)

// Limits bound what one client, account or session can do per minute (the zero Limit is no
// limit). With Deps.SharedLimits they are counted over every API process of the shop, else in
// this process alone. A client is its address (an IPv6 address's /64: ratelimit.ClientKey).
type Limits struct {
	LoginPerClient    ratelimit.Limit // login attempts per client
	LoginPerAccount   ratelimit.Limit // login attempts per e-mail, from anywhere
	SessionsPerClient ratelimit.Limit // new sessions per client
	EventsPerSession  ratelimit.Limit // events posted per session
	// EventsPerClient caps a client's events over all its sessions: sessions are cheap, so
	// a per-session quota alone grows with every session a client opens.
	EventsPerClient ratelimit.Limit
	// RegisterPerClient caps registrations per client: each costs a bcrypt hash.
	RegisterPerClient ratelimit.Limit
}

// PerMinute is a limit of n per minute with a burst of half a minute's worth (0: no limit).
func PerMinute(n float64) ratelimit.Limit {
	return ratelimit.Limit{PerMinute: n, Burst: max(1, int(n/2))}
}

// DefaultLimits are serve's defaults: far above a person's pace, far below a script's.
func DefaultLimits() Limits {
	return Limits{LoginPerClient: PerMinute(20), LoginPerAccount: PerMinute(10),
		SessionsPerClient: PerMinute(60), EventsPerSession: PerMinute(600), EventsPerClient: PerMinute(2400),
		RegisterPerClient: PerMinute(10)}
}

// SharedLimiter keeps rate limits in a store every API process of the shop shares
// (mongostore's rate limits): name tells the limits apart, now is the API's clock.
type SharedLimiter interface {
	Allow(ctx context.Context, name string, l ratelimit.Limit, key string, now time.Time) (ok bool, retryAfter time.Duration, err error)
}

// limiter is one limit, counted in this process or in the shared store.
type limiter struct {
	name   string
	limit  ratelimit.Limit
	local  *ratelimit.Keyed
	shared SharedLimiter
	now    func() time.Time
}

func (l limiter) allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if l.shared != nil {
		return l.shared.Allow(ctx, l.name, l.limit, key, l.now())
	}
	ok, wait := l.local.Allow(key, 1)
	return ok, wait, nil
}

type limiters struct {
	loginClient, loginAccount, sessions, events, eventsClient, register limiter
}

func newLimiters(l Limits, shared SharedLimiter, now func() time.Time) limiters {
	if now == nil {
		now = time.Now
	}
	mk := func(name string, lim ratelimit.Limit) limiter {
		out := limiter{name: name, limit: lim, shared: shared, now: now}
		if shared == nil || lim.Off() {
			out.shared, out.local = nil, ratelimit.New(lim, 0, now)
		}
		return out
	}
	return limiters{
		loginClient:  mk("login-client", l.LoginPerClient),
		loginAccount: mk("login-account", l.LoginPerAccount),
		sessions:     mk("sessions-client", l.SessionsPerClient),
		events:       mk("events-session", l.EventsPerSession),
		eventsClient: mk("events-client", l.EventsPerClient),
		register:     mk("register-client", l.RegisterPerClient),
	}
}

// take asks each (limiter, key) in turn and refuses with 429 at the first that is spent.
func take(ctx context.Context, what string, checks ...check) error {
	for _, c := range checks {
		ok, wait, err := c.l.allow(ctx, c.key)
		if err != nil {
			return fmt.Errorf("rate limit: %w", err)
		}
		if !ok {
			secs := max(1, int(math.Ceil(wait.Seconds())))
			p := problem(http.StatusTooManyRequests, "rate-limited", "Too many requests",
				fmt.Sprintf("too many %s; retry in %d s", what, secs))
			p.RetryAfter = strconv.Itoa(secs)
			return p
		}
	}
	return nil
}

type check = struct {
	l   limiter
	key string
}

func (s *server) limitLogin(r *http.Request, email string) error {
	return take(r.Context(), "login attempts", check{s.limits.loginClient, ratelimit.ClientKey(clientIP(r))},
		check{s.limits.loginAccount, account.NormalizeEmail(email)})
}

func (s *server) limitSessions(r *http.Request) error {
	return take(r.Context(), "new sessions from this address", check{s.limits.sessions, ratelimit.ClientKey(clientIP(r))})
}

func (s *server) limitEvents(r *http.Request, c *caller) error {
	return take(r.Context(), "events", check{s.limits.events, c.sess.ID},
		check{s.limits.eventsClient, ratelimit.ClientKey(clientIP(r))})
}

func (s *server) limitRegister(r *http.Request) error {
	return take(r.Context(), "registrations from this address", check{s.limits.register, ratelimit.ClientKey(clientIP(r))})
}
