package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
)

// Events under the spec's firehose key {_id: 1}: the _id is built from the event time
// (eventObjectID), so appends go to the newest chunk (the fast zone) and one actor's day is an
// _id range read newest first by _id alone.
type events Store

func (r *events) store() *Store { return (*Store)(r) }

// AppendEvent inserts the event; appending the same event again (a retried request) hits the
// deterministic _id and is ignored, as the embedded store ignores it.
func (r *events) AppendEvent(ctx context.Context, ev event.Event) error {
	id, err := eventObjectID(ev.Actor, ev.ID, ev.At)
	if err != nil {
		return err
	}
	doc := eventDoc{ID: id, EventID: ev.ID, Actor: ev.Actor, Type: string(ev.Type), At: ev.At,
		ProductID: ev.ProductID, Details: toKV(ev.Details)}
	if _, err := r.store().coll(collEvents).InsertOne(ctx, doc); err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("mongo: insert event: %w", err)
	}
	return nil
}

// PurgeEvents deletes by _id, which sorts like the event's time (eventObjectID): a range on
// the _id index, not a collection scan. Without a shard key in the filter it is a broadcast,
// once per purge round.
func (r *events) PurgeEvents(ctx context.Context, before time.Time) (int, error) {
	if before.Unix() <= 0 {
		return 0, nil
	}
	res, err := r.store().coll(collEvents).DeleteMany(ctx, d(e("_id", d(e("$lt", timeObjectID(before))))))
	if err != nil {
		return 0, fmt.Errorf("mongo: purge events: %w", err)
	}
	return int(res.DeletedCount), nil
}

// eventCursor is the last _id returned, hex.
type eventCursor struct {
	ID string `json:"i"`
}

// ListEvents is EVT-1: one actor's UTC day, newest first, optionally one type. Events are not in
// the RPL-1 table, so they read the primary.
func (r *events) ListEvents(ctx context.Context, q event.Query) (page paging.Page[event.Event], err error) {
	req, err := q.Page.Normalize()
	if err != nil {
		return page, err
	}
	var before *bson.ObjectID
	if req.Cursor != "" {
		var c eventCursor
		if err := paging.Decode(req.Cursor, &c); err != nil {
			return page, err
		}
		id, err := bson.ObjectIDFromHex(c.ID)
		if err != nil {
			return page, paging.Decode("!", &c) // the same validation error as any foreign cursor
		}
		before = &id
	}
	page, err = findPage(ctx, r.store().coll(collEvents), eventsFilter(q, before), newestFirst, req.Limit, eventDoc.event,
		func(doc eventDoc) any { return eventCursor{ID: doc.ID.Hex()} })
	if err != nil {
		return page, fmt.Errorf("mongo: list events: %w", err)
	}
	return page, nil
}
