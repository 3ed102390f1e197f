package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/session"
)

func newSession(ttl time.Duration, now time.Time) session.Session {
	return session.Session{ID: uid("sess"), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(ttl),
		IP: "203.0.113.7", UserAgent: "test/1.0", Status: session.StatusActive, Data: map[string]string{"locale": "ru"}}
}

// Sessions is the session contract (SES-1).
func Sessions(t *testing.T, newRepo func(t *testing.T) session.Repository) {
	t.Run("SES-1 a revoked session is gone at once, and revoking twice is fine", func(t *testing.T) { sessionsRevoke(t, newRepo) })
	t.Run("SES-1 create get bind touch", func(t *testing.T) { sessionsCreateGetBindTouch(t, newRepo) })
	t.Run("SES-1 expired session is invisible at once", func(t *testing.T) { sessionsExpiredInvisible(t, newRepo) })
	t.Run("SES-1 expired sessions are purged", func(t *testing.T) { sessionsExpiredPurged(t, newRepo) })
}

func sessionsRevoke(t *testing.T, newRepo func(t *testing.T) session.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	s, other := newSession(time.Hour, base), newSession(time.Hour, base)
	for _, x := range []session.Session{s, other} {
		if err := r.CreateSession(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Revoke(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetSession(ctx, s.ID, base); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("revoked session: got %v, want ErrNotFound", err)
	}
	if err := r.Revoke(ctx, s.ID); err != nil {
		t.Errorf("second revoke: %v", err)
	}
	if _, err := r.GetSession(ctx, other.ID, base); err != nil {
		t.Errorf("revoke touched another session: %v", err)
	}
}

func sessionsCreateGetBindTouch(t *testing.T, newRepo func(t *testing.T) session.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	s := newSession(time.Hour, base)
	if err := r.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := r.GetSession(ctx, s.ID, base)
	if err != nil || got.UserID != "" || got.IP != s.IP || got.UserAgent != s.UserAgent || got.Data["locale"] != "ru" || got.Status != session.StatusActive {
		t.Fatalf("get: %+v, %v", got, err)
	}
	sameInstant(t, "expires_at", got.ExpiresAt, s.ExpiresAt)
	userID := uid("u")
	bound, err := r.BindUser(ctx, s.ID, userID, base)
	if err != nil || bound.UserID != userID {
		t.Fatalf("bind: %+v, %v", bound, err)
	}
	if _, err := r.BindUser(ctx, s.ID, userID, base); err != nil {
		t.Errorf("bind same user again: %v", err)
	}
	if _, err := r.BindUser(ctx, s.ID, uid("u"), base); !errors.Is(err, session.ErrBoundToOtherUser) {
		t.Errorf("bind another user: got %v, want ErrBoundToOtherUser", err)
	}
	later := base.Add(10 * time.Minute)
	if err := r.Touch(ctx, s.ID, later); err != nil {
		t.Fatal(err)
	}
	got, _ = r.GetSession(ctx, s.ID, later)
	sameInstant(t, "last_active", got.LastActive, later)
	sameInstant(t, "expires_at after touch", got.ExpiresAt, s.ExpiresAt)
	if got.UserID != userID {
		t.Errorf("user after touch: %q, want %q", got.UserID, userID)
	}
	if _, err := r.GetSession(ctx, uid("missing"), base); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("missing: got %v, want ErrNotFound", err)
	}
	if _, err := r.BindUser(ctx, uid("missing"), userID, base); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bind missing: got %v, want ErrNotFound", err)
	}
}

func sessionsExpiredInvisible(t *testing.T, newRepo func(t *testing.T) session.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	s := newSession(time.Hour, base)
	if err := r.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetSession(ctx, s.ID, s.ExpiresAt); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("at expiry: got %v, want ErrNotFound", err)
	}
	if _, err := r.BindUser(ctx, s.ID, uid("u"), s.ExpiresAt); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bind expired: got %v, want ErrNotFound", err)
	}
}

func sessionsExpiredPurged(t *testing.T, newRepo func(t *testing.T) session.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	start := time.Now().UTC()
	s := newSession(time.Second, start)
	keep := newSession(time.Hour, start)
	for _, x := range []session.Session{s, keep} {
		if err := r.CreateSession(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	// Once the session has expired, a purge removes it for good: read as of a moment before
	// its expiry, it is gone, not merely hidden. A store that purges by expires_at does so
	// the moment it has passed; Cassandra's TTL, in whole seconds, may take a second more.
	eventually.NoError(t, purgeWithin, func() error {
		if _, err := r.PurgeExpired(ctx, time.Now().UTC()); err != nil {
			t.Fatalf("purge: %v", err)
		}
		if _, err := r.GetSession(ctx, s.ID, start); !errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("expired session still stored after a purge: %v", err)
		}
		return nil
	})
	if _, err := r.GetSession(ctx, keep.ID, time.Now().UTC()); err != nil {
		t.Errorf("live session purged: %v", err)
	}
}
