package mongostore

import (
	"context"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/session"
)

// Sessions under {_id: "hashed"}: every operation is by session id, so targeted. expires_at
// carries a TTL index (expireAfterSeconds: 0, the spec's expires_at_ttl); its monitor runs only
// every 60 s, so every read also filters expires_at > now and an expired session is invisible at
// once (SES-1); PurgeExpired deletes explicitly.
type sessions Store

func (r *sessions) store() *Store { return (*Store)(r) }

func (r *sessions) CreateSession(ctx context.Context, s session.Session) error {
	if _, err := r.store().coll(collSessions).InsertOne(ctx, toSessionDoc(s)); err != nil {
		return fmt.Errorf("mongo: insert session: %w", err)
	}
	return nil
}

// GetSession reads the primary: a session is an authentication decision, and the read table
// (RPL-1) gives sessions no staleness budget.
func (r *sessions) GetSession(ctx context.Context, id string, now time.Time) (session.Session, error) {
	var doc sessionDoc
	found, err := decodeOne(r.store().coll(collSessions).FindOne(ctx, liveSessionFilter(id, now)), &doc)
	if err != nil {
		return session.Session{}, fmt.Errorf("mongo: read session: %w", err)
	}
	if !found {
		return session.Session{}, session.ErrNotFound
	}
	return doc.session(), nil
}

// BindUser is one findAndModify that binds only an anonymous session or confirms the same user;
// on no match, a second read tells "missing or expired" from "someone else's".
func (r *sessions) BindUser(ctx context.Context, id, userID string, now time.Time) (session.Session, error) {
	var doc sessionDoc
	found, err := decodeOne(r.store().coll(collSessions).FindOneAndUpdate(ctx, bindSessionFilter(id, userID, now),
		d(e("$set", d(e("user_id", userID)))), returnAfter), &doc)
	if err != nil {
		return session.Session{}, fmt.Errorf("mongo: bind session: %w", err)
	}
	if found {
		return doc.session(), nil
	}
	if _, err := r.GetSession(ctx, id, now); err != nil {
		return session.Session{}, err
	}
	return session.Session{}, session.ErrBoundToOtherUser
}

// Touch records activity without extending the expiry (a guest cart's TTL is tied to it).
func (r *sessions) Touch(ctx context.Context, id string, now time.Time) error {
	_, err := r.store().coll(collSessions).UpdateOne(ctx, liveSessionFilter(id, now),
		d(e("$set", d(e("last_active", now)))))
	if err != nil {
		return fmt.Errorf("mongo: touch session: %w", err)
	}
	return nil
}

// Revoke deletes the session by its _id (targeted under {_id: hashed}).
func (r *sessions) Revoke(ctx context.Context, id string) error {
	if _, err := r.store().coll(collSessions).DeleteOne(ctx, d(e("_id", id))); err != nil {
		return fmt.Errorf("mongo: revoke session: %w", err)
	}
	return nil
}

func (r *sessions) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	res, err := r.store().coll(collSessions).DeleteMany(ctx, expiredFilter(now))
	if err != nil {
		return 0, fmt.Errorf("mongo: purge sessions: %w", err)
	}
	return int(res.DeletedCount), nil
}
