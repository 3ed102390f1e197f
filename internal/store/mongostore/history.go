package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/readrouting"
)

// Order history (ORD-2, HIS-1) as its own collection, sharded like orders on {user_id: hashed}:
// the projector fills it, so a MongoDB-only placement serves the same history.Repository as
// Cassandra. Every operation carries user_id: targeted.
type historyRepo Store

func (r *historyRepo) store() *Store { return (*Store)(r) }

// UpsertEntry replaces the entry unless the stored one is newer (updated_at), so a replayed
// older status never overwrites a newer one. On a newer stored entry the filter misses, the
// upsert tries to insert the same _id and gets a duplicate key: that is the "keep" outcome.
func (r *historyRepo) UpsertEntry(ctx context.Context, h history.Entry) error {
	filter := append(historyKey(h.UserID, h.OrderID), e("updated_at", d(e("$lte", h.UpdatedAt))))
	_, err := r.store().coll(collHistory).ReplaceOne(ctx, filter, toHistoryDoc(h), options.Replace().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("mongo: upsert history: %w", err)
	}
	return nil
}

// ListHistory reads under the 10 s history budget (RPL-1), newest first, keyset-paginated.
func (r *historyRepo) ListHistory(ctx context.Context, userID string, req paging.Request) (page paging.Page[history.Entry], err error) {
	req, err = req.Normalize()
	if err != nil {
		return page, err
	}
	var before *historyCursor
	if req.Cursor != "" {
		before = &historyCursor{}
		if err := paging.Decode(req.Cursor, before); err != nil {
			return page, err
		}
	}
	coll, _ := r.store().reader(collHistory, readrouting.OpOrderHistory)
	page, err = findPage(ctx, coll, historyFilter(userID, before), historySort, req.Limit, historyDoc.entry,
		func(doc historyDoc) any { return historyCursor{At: doc.PlacedAt.UnixMilli(), ID: doc.ID} })
	if err != nil {
		return page, fmt.Errorf("mongo: list history: %w", err)
	}
	return page, nil
}
