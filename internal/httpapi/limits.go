package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/ratelimit"
)

// Limits bound what one client, account or session can do per minute (the zero Limit is no
// limit). They are per API process. A client is its address (an IPv6 address's /64:
// ratelimit.ClientKey).
type Limits struct {
	LoginPerClient    ratelimit.Limit // login attempts per client
	LoginPerAccount   ratelimit.Limit // login attempts per e-mail, from anywhere
	SessionsPerClient ratelimit.Limit // new sessions per client
	EventsPerSession  ratelimit.Limit // events posted per session
	// EventsPerClient caps a client's events over all its sessions: sessions are cheap, so
	// a per-session quota alone grows with every session a client opens.
	EventsPerClient ratelimit.Limit
}

// PerMinute is a limit of n per minute with a burst of half a minute's worth (0: no limit).
func PerMinute(n float64) ratelimit.Limit {
	return ratelimit.Limit{PerMinute: n, Burst: max(1, int(n/2))}
}

// DefaultLimits are serve's defaults: far above a person's pace, far below a script's.
func DefaultLimits() Limits {
	return Limits{LoginPerClient: PerMinute(20), LoginPerAccount: PerMinute(10),
		SessionsPerClient: PerMinute(60), EventsPerSession: PerMinute(600), EventsPerClient: PerMinute(2400)}
}

type limiters struct {
	loginClient, loginAccount, sessions, events, eventsClient *ratelimit.Keyed
}

func newLimiters(l Limits, now func() time.Time) limiters {
	return limiters{
		loginClient:  ratelimit.New(l.LoginPerClient, 0, now),
		loginAccount: ratelimit.New(l.LoginPerAccount, 0, now),
		sessions:     ratelimit.New(l.SessionsPerClient, 0, now),
		events:       ratelimit.New(l.EventsPerSession, 0, now),
		eventsClient: ratelimit.New(l.EventsPerClient, 0, now),
	}
}

// take asks each (limiter, key) in turn and refuses with 429 at the first that is spent.
func take(what string, checks ...check) error {
	for _, c := range checks {
		if ok, wait := c.k.Allow(c.key, 1); !ok {
			secs := int(math.Ceil(wait.Seconds()))
			p := problem(http.StatusTooManyRequests, "rate-limited", "Too many requests",
				fmt.Sprintf("too many %s; retry in %d s", what, secs))
			p.RetryAfter = strconv.Itoa(secs)
			return p
		}
	}
	return nil
}

type check = struct {
	k   *ratelimit.Keyed
	key string
}

func (s *server) limitLogin(r *http.Request, email string) error {
	return take("login attempts", check{s.limits.loginClient, ratelimit.ClientKey(clientIP(r))},
		check{s.limits.loginAccount, account.NormalizeEmail(email)})
}

func (s *server) limitSessions(r *http.Request) error {
	return take("new sessions from this address", check{s.limits.sessions, ratelimit.ClientKey(clientIP(r))})
}

func (s *server) limitEvents(r *http.Request, c *caller) error {
	return take("events", check{s.limits.events, c.sess.ID},
		check{s.limits.eventsClient, ratelimit.ClientKey(clientIP(r))})
}
