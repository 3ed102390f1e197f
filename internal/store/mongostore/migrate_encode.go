package mongostore

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// `shardmart migrate --to mongo` (internal/migrate) writes these documents itself, with the
// conditions its ordering rule needs, so the repositories read back exactly what they store.

// SessionDocument is s as CreateSession stores it.
func SessionDocument(s session.Session) any { return toSessionDoc(s) }

// HistoryDocument is h as UpsertEntry stores it, and the filter selecting it (shard key
// included, so a sharded write is targeted).
func HistoryDocument(h history.Entry) (doc any, key bson.D) {
	return toHistoryDoc(h), historyKey(h.UserID, h.OrderID)
}

// EventDocument is ev as AppendEvent stores it (its _id derived from the event).
func EventDocument(ev event.Event) (any, error) {
	id, err := eventObjectID(ev.Actor, ev.ID, ev.At)
	if err != nil {
		return nil, err
	}
	return eventDoc{ID: id, EventID: ev.ID, Actor: ev.Actor, Type: string(ev.Type), At: ev.At,
		ProductID: ev.ProductID, Details: toKV(ev.Details)}, nil
}
