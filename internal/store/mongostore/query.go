package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/paging"
)

// findPage runs a keyset page query: it asks for one document more than the limit, and when that
// one comes back it trims it and encodes the position of the last kept document as the cursor.
func findPage[D, T any](ctx context.Context, coll *mongo.Collection, filter, sort any, limit int,
	item func(D) T, position func(D) any) (paging.Page[T], error) {
	var page paging.Page[T]
	cur, err := coll.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(limit+1)))
	if err != nil {
		return page, err
	}
	var docs []D
	if err := cur.All(ctx, &docs); err != nil {
		return page, err
	}
	if len(docs) > limit {
		docs = docs[:limit]
		page.Next = paging.Encode(position(docs[limit-1]))
	}
	page.Items = make([]T, len(docs))
	for i, doc := range docs {
		page.Items[i] = item(doc)
	}
	return page, nil
}
