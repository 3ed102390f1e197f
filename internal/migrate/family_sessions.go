package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// sessionsFamily: keyed by the session id (a SHA-256 in hex), living until its expiry.
type sessionsFamily struct{ oldRows[session.Session] }

var sessionRows = oldRows[session.Session]{
	table: "sessions", key: "id", sel: sqlitestore.SessionSelect,
	scan: func(rs *sql.Rows) (session.Session, error) {
		s, err := sqlitestore.ScanSession(rs)
		if s.Data == nil {
			s.Data = map[string]string{}
		}
		return s, err
	},
	coll:   mongoFamily{coll: mongostore.SessionsCollection, key: "_id"},
	decode: current(mongostore.DecodeSession),
	row:    func(s *session.Session) Row { return Row{Key: s.ID, Session: s} },
	of:     func(r Row) *session.Session { return r.Session },
}

// stamp: BindUser changes user_id without touching last_active, so a replay after such a
// change ties on the timestamp; the dual-write phase, not the backfill, carries that change.
func (sessionsFamily) stamp(r *Row, _ time.Duration) {
	r.Modified, r.Expires = latest(r.Session.CreatedAt, r.Session.LastActive), r.Session.ExpiresAt
}

func (sessionsFamily) write(ctx context.Context, t *Target, r Row, ttl int) error {
	b := t.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(t.quorum())
	cassandrastore.AddSessionWrite(b, *r.Session, r.Modified.UnixMicro(), ttl)
	return b.ExecContext(ctx)
}

func (sessionsFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	return cassandrastore.SessionScan(ctx, t.s, func(s session.Session) error { return fn(sessionRows.row(&s)) })
}

// replace: a tombstone at ts-1 over the session's old cells and its state at ts, in one
// batch, so a session gone from the old store (revoked, purged) is deleted.
func (sessionsFamily) replace(ctx context.Context, t *Target, key string, rows []Row, ts, now time.Time) error {
	b := t.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(t.quorum())
	cassandrastore.AddSessionDelete(b, key, ts.UnixMicro()-1)
	for _, r := range rows {
		if ttl := ttlLeft(r.Expires, now); ttl >= 0 {
			cassandrastore.AddSessionWrite(b, *r.Session, ts.UnixMicro(), ttl)
		}
	}
	if err := b.ExecContext(ctx); err != nil {
		return fmt.Errorf("migrate: mirror session %s: %w", key, err)
	}
	return nil
}

func (sessionsFamily) canonical(r Row, c *canon) {
	s := r.Session
	ip := ""
	if v := canonIP(s.IP); v != nil {
		ip = v.String()
	}
	c.field("session", s.ID, s.UserID, c.t(s.CreatedAt), c.t(s.LastActive), c.t(s.ExpiresAt), ip, s.UserAgent, string(s.Status))
	c.sortedMap(s.Data)
}
