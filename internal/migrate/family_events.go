package migrate

import (
	"context"
	"database/sql"
	"time"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// eventsFamily: click events, keyed by the event id, never changed: the same event written
// twice is one row, living its retention after its time (event.Expiry).
type eventsFamily struct{ oldRows[event.Event] }

var eventRows = oldRows[event.Event]{
	table: "events", key: "id", sel: sqlitestore.EventSelect,
	scan: func(rs *sql.Rows) (event.Event, error) { return sqlitestore.ScanEvent(rs) },
	// An event's _id is a time-ordered ObjectId; its key is event_id (EnsureIndexes).
	coll:   mongoFamily{coll: mongostore.EventsCollection, key: "event_id", index: "migrate_event_id"},
	decode: current(mongostore.DecodeEvent),
	row:    func(e *event.Event) Row { return Row{Key: e.ID, Event: e} },
	of:     func(r Row) *event.Event { return r.Event },
}

func (eventsFamily) stamp(r *Row, retention time.Duration) {
	r.Modified, r.Expires = r.Event.At, event.Expiry(r.Event.At, retention)
}

// write goes through the shop's repository, which gives the row its TTL from the event's time.
func (eventsFamily) write(ctx context.Context, t *Target, r Row, _ int) error {
	return cassandrastore.NewEvents(t.s, t.Retention).AppendEvent(ctx, *r.Event)
}

func (eventsFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	return cassandrastore.EventScan(ctx, t.s, func(e event.Event) error { return fn(eventRows.row(&e)) })
}

func (eventsFamily) replace(ctx context.Context, t *Target, _ string, rows []Row, _, now time.Time) error {
	_, err := t.Write(ctx, Events, rows, now)
	return err
}

func (eventsFamily) canonical(r Row, c *canon) {
	e := r.Event
	c.field("event", e.ID, e.Actor, string(e.Type), c.t(e.At), e.ProductID)
	c.sortedMap(e.Details)
}
