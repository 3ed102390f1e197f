package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/validation"
)

// sessions implements session.Repository on the sessions table (CAS-1): a session is created
// at QUORUM and read at ONE, and a read at ONE that does not find it reads again at QUORUM.
// A token is then accepted on the next request by any process, whichever replica that request
// reaches first (W + R > RF on the miss), while the common read, of a session that exists,
// stays one replica's answer. A touch stays at ONE: losing one is harmless. Every write carries USING TTL = (expires_at - now), so Cassandra itself removes a session
// when it expires; reads also compare expires_at with now, so an expired session is invisible
// at once, to the millisecond, even during the last fraction of a second of its TTL.
type sessions Store

const (
	sessionCols     = `session_id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data`
	sessionInsert   = `INSERT INTO sessions (` + sessionCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	sessionSelect   = `SELECT ` + sessionCols + ` FROM sessions WHERE session_id = ?`
	sessionTouch    = `UPDATE sessions USING TTL ? SET last_active = ? WHERE session_id = ?`
	sessionBindUser = `UPDATE sessions USING TTL ? SET user_id = ? WHERE session_id = ? IF user_id = null AND status = ?`
)

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// parseIP accepts an address with or without a port; empty stores null.
func parseIP(s string) (net.IP, error) {
	if s == "" {
		return nil, nil
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, validation.Field("ip", "must be an IPv4 or IPv6 address")
	}
	return ip, nil
}

func (r *sessions) CreateSession(ctx context.Context, s session.Session) error {
	ip, err := parseIP(s.IP)
	if err != nil {
		return err
	}
	var ipv any
	if ip != nil {
		ipv = ip
	}
	data := s.Data
	if data == nil {
		data = map[string]string{}
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	err = r.p.idempotent(ctx, r.s.Query(sessionInsert, s.ID, nullable(s.UserID), ts(s.CreatedAt), ts(s.LastActive), ts(s.ExpiresAt),
		ipv, s.UserAgent, string(s.Status), data, ttlUntil(s.ExpiresAt, time.Now())).Consistency(r.p.levels().SessionWrites)).Exec()
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// sessionRow is a row of sessionCols as scanned, before it is a session.
type sessionRow struct {
	s              session.Session
	userID, status *string
	ip             net.IP
}

func (r *sessionRow) dest() []any {
	return []any{&r.s.ID, &r.userID, &r.s.CreatedAt, &r.s.LastActive, &r.s.ExpiresAt, &r.ip, &r.s.UserAgent, &r.status, &r.s.Data}
}

// session is the row's session; a null user, status or ip is empty.
func (r *sessionRow) session() session.Session {
	s := r.s
	if r.status != nil {
		s.Status = session.Status(*r.status)
	}
	if r.userID != nil {
		s.UserID = *r.userID
	}
	if r.ip != nil {
		s.IP = r.ip.String()
	}
	return s
}

func (r *sessions) get(ctx context.Context, id string, now time.Time, cl gocql.Consistency) (session.Session, error) {
	var row sessionRow
	err := r.p.idempotent(ctx, r.s.Query(sessionSelect, id).Consistency(cl)).Scan(row.dest()...)
	if errors.Is(err, gocql.ErrNotFound) {
		return session.Session{}, errNoRow
	}
	if err != nil {
		return session.Session{}, fmt.Errorf("read session: %w", err)
	}
	// A row without expiry or status is a remnant of a write that outlived the row: gone.
	if row.status == nil || row.s.ExpiresAt.IsZero() || !row.s.ExpiresAt.After(now) {
		return session.Session{}, session.ErrNotFound
	}
	s := row.session()
	if s.Data == nil {
		s.Data = map[string]string{}
	}
	return s, nil
}

func (r *sessions) GetSession(ctx context.Context, id string, now time.Time) (session.Session, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	return r.read(ctx, id, now)
}

// read is the session at ONE, or at QUORUM when the replica that answered has no row for it:
// the create may not have reached that replica yet. A row found, expired or not, is the answer.
func (r *sessions) read(ctx context.Context, id string, now time.Time) (session.Session, error) {
	l := r.p.levels()
	s, err := r.get(ctx, id, now, l.Sessions)
	if errors.Is(err, errNoRow) && l.SessionWrites != l.Sessions {
		s, err = r.get(ctx, id, now, l.SessionWrites)
	}
	if errors.Is(err, errNoRow) {
		return s, session.ErrNotFound
	}
	return s, err
}

// errNoRow is a session read that found no row at all (wraps session.ErrNotFound), as opposed to
// a row past its expiry.
var errNoRow = fmt.Errorf("%w: no row", session.ErrNotFound)

// BindUser is a lightweight transaction: two logins racing on one anonymous session must not
// both succeed. The condition on status keeps it from creating a row for a session that
// expired between the read and the write.
func (r *sessions) BindUser(ctx context.Context, id, userID string, now time.Time) (session.Session, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	return casLoop(ctx, r.p, "bind session", func(ctx context.Context, a casAttempt) (session.Session, *casOp[session.Session], error) {
		var s session.Session
		var err error
		if a.n > 0 {
			// Bound by someone meanwhile, or the outcome is unknown: read what Paxos holds.
			s, err = r.get(ctx, id, now, a.cl)
		} else {
			s, err = r.read(ctx, id, now)
		}
		if errors.Is(err, errNoRow) {
			err = session.ErrNotFound
		}
		if err != nil {
			return s, nil, err
		}
		switch s.UserID {
		case userID:
			return s, nil, nil
		case "":
		default:
			return s, nil, session.ErrBoundToOtherUser
		}
		q := r.s.Query(sessionBindUser, ttlUntil(s.ExpiresAt, time.Now()), userID, id, string(s.Status)).
			WithContext(ctx).Consistency(r.p.levels().SessionWrites).SerialConsistency(r.p.levels().Serial)
		return s, &casOp[session.Session]{query: q, applied: func() session.Session {
			s.UserID = userID
			return s
		}}, nil
	})
}

// Touch reads the session for its expiry so the new cell expires with the row: a blind
// write would either outlive the session or need the expiry passed in.
func (r *sessions) Touch(ctx context.Context, id string, now time.Time) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	s, err := r.get(ctx, id, now, r.p.levels().Sessions)
	if errors.Is(err, session.ErrNotFound) {
		return nil // not on this replica yet, or gone: the touch is not worth a quorum read
	}
	if err != nil {
		return err
	}
	err = r.p.idempotent(ctx, r.s.Query(sessionTouch, ttlUntil(s.ExpiresAt, time.Now()), ts(now), id).Consistency(r.p.levels().Sessions)).Exec()
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	return nil
}

// Revoke deletes the session at ALL: sessions are read at ONE, and only a delete every replica
// has taken guarantees no read still finds the token. With a replica down it falls back to
// QUORUM (hints deliver the rest; until then a read at ONE of that replica may still find the
// token), and says so in the returned error only if that fails too.
func (r *sessions) Revoke(ctx context.Context, id string) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	q := `DELETE FROM sessions WHERE session_id = ?`
	err := r.p.idempotent(ctx, r.s.Query(q, id).Consistency(gocql.All)).Exec()
	if err == nil {
		return nil
	}
	if err := r.p.idempotent(ctx, r.s.Query(q, id).Consistency(r.p.levels().SessionWrites)).Exec(); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// PurgeExpired has nothing to do: TTLs remove expired sessions (and no repair is scheduled
// for sessions: a lost session means a re-login).
func (r *sessions) PurgeExpired(ctx context.Context, now time.Time) (int, error) { return 0, nil }
