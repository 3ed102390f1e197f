package migrate

import (
	"context"
	"database/sql"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// eventsFamily: click events, keyed by the event id, never changed: the same event written
// twice is one row, living its retention after its time (event.Expiry).
type eventsFamily struct{}

func (eventsFamily) sqlite() (string, string) { return "events", "id" }

func (eventsFamily) readSQLite(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	return readSQLiteRows(ctx, tx, sqlitestore.EventSelect, "id", r, func(rs *sql.Rows) (Row, error) {
		e, err := sqlitestore.ScanEvent(rs)
		return Row{Key: e.ID, Event: &e}, err
	})
}

// mongo: an event's _id is a time-ordered ObjectId; its key is event_id (EnsureIndexes).
func (eventsFamily) mongo() mongoFamily {
	return mongoFamily{coll: mongostore.EventsCollection, key: "event_id", index: "migrate_event_id"}
}

func (eventsFamily) decodeMongo(raw bson.Raw) (Row, bool, error) {
	e, err := mongostore.DecodeEvent(raw)
	return Row{Key: e.ID, Event: &e}, false, err
}

func (eventsFamily) stamp(r *Row, retention time.Duration) {
	r.Modified, r.Expires = r.Event.At, event.Expiry(r.Event.At, retention)
}

func (eventsFamily) holds(r Row) bool { return r.Event != nil }

// write goes through the shop's repository, which gives the row its TTL from the event's time.
func (eventsFamily) write(ctx context.Context, t *Target, r Row, _ int) error {
	return cassandrastore.NewEvents(t.s, t.Retention).AppendEvent(ctx, *r.Event)
}

func (eventsFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	return cassandrastore.EventScan(ctx, t.s, func(e event.Event) error { return fn(Row{Key: e.ID, Event: &e}) })
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
