package cassandrastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

// events implements event.Repository on user_events at consistency ONE: appends are the
// bulk of the write load and a lost click does not change a trend.
type events Store

const (
	eventInsert = `INSERT INTO user_events (actor, event_date, at, event_id, type, product_id, details) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	eventCols   = `actor, at, event_id, type, product_id, details`
	eventList   = `SELECT ` + eventCols + ` FROM user_events WHERE actor = ? AND event_date = ?`
	// The type filter runs inside one (actor, day) partition, which the key bounds, so
	// ALLOW FILTERING scans at most one user's day; the page size counts matching rows.
	eventListByType = `SELECT ` + eventCols + ` FROM user_events WHERE actor = ? AND event_date = ? AND type = ? ALLOW FILTERING`
)

func (r *events) AppendEvent(ctx context.Context, e event.Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if e.ID == "" {
		e.ID = gocql.TimeUUID().String()
	}
	details := e.Details
	if details == nil {
		details = map[string]string{}
	}
	now := time.Now()
	exp := event.Expiry(e.At, r.eventRetention)
	if !exp.After(now) {
		return nil // past the retention already: the row would be born expired
	}
	ttl := ttlUntil(exp, now)
	// The primary key includes event_id, so a retried append rewrites the same row.
	ctx, cancel := bounded(ctx)
	defer cancel()
	err := r.p.idempotent(ctx, r.s.Query(eventInsert, e.Actor, event.Day(e.At), ts(e.At), e.ID, string(e.Type), e.ProductID, details, ttl).
		Consistency(r.p.levels().Events)).Exec()
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

// PurgeEvents has nothing to do: every row carries a TTL ending at its event's time plus the
// retention.
func (r *events) PurgeEvents(ctx context.Context, before time.Time) (int, error) { return 0, nil }

// driverCursor is the position of a list that resumes with the driver's paging state; Q
// fingerprints the query so a cursor is refused on another one.
type driverCursor struct {
	Q string `json:"q"`
	S []byte `json:"s,omitempty"`
	B int    `json:"b,omitempty"` // history: the month bucket the state belongs to
}

func fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

var errForeignCursor = validation.Field("cursor", "is not a cursor this server issued")

// cursorErr turns the server's refusal of a damaged paging state into the cursor's
// validation error: the state came from the client, so it is bad input, not a failure.
func cursorErr(err error, state []byte) error {
	var re gocql.RequestError
	if len(state) > 0 && errors.As(err, &re) && (re.Code() == gocql.ErrCodeInvalid || re.Code() == gocql.ErrCodeProtocol || re.Code() == gocql.ErrCodeServer) {
		return errForeignCursor
	}
	return err
}

func (r *events) ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error) {
	var out paging.Page[event.Event]
	page, err := q.Page.Normalize()
	if err != nil {
		return out, err
	}
	day := event.Day(q.Day)
	fp := fingerprint("events", q.Actor, day.Format(time.DateOnly), string(q.Type))
	var state []byte
	if page.Cursor != "" {
		var c driverCursor
		if err := paging.Decode(page.Cursor, &c); err != nil {
			return out, err
		}
		if c.Q != fp || len(c.S) == 0 {
			return out, errForeignCursor
		}
		state = c.S
	}
	var qry *gocql.Query
	if q.Type != "" {
		qry = r.s.Query(eventListByType, q.Actor, day, string(q.Type))
	} else {
		qry = r.s.Query(eventList, q.Actor, day)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	iter := r.p.idempotent(ctx, qry.Consistency(r.p.levels().Events).PageSize(page.Limit).PageState(state)).Iter()
	for {
		var e event.Event
		if !scanEvent(iter, &e) {
			break
		}
		out.Items = append(out.Items, e)
	}
	next := iter.PageState()
	if err := iter.Close(); err != nil {
		return out, cursorErr(fmt.Errorf("list events: %w", err), state)
	}
	if len(next) > 0 {
		out.Next = paging.Encode(driverCursor{Q: fp, S: next})
	}
	return out, nil
}

// scanEvent reads a row of eventCols.
func scanEvent(iter *gocql.Iter, e *event.Event) bool {
	var typ string
	if !iter.Scan(&e.Actor, &e.At, &e.ID, &typ, &e.ProductID, &e.Details) {
		return false
	}
	e.Type = event.Type(typ)
	return true
}
