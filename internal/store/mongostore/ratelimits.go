package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/ratelimit"
)

// Rate limits shared by every API process of the shop: one document per limit and key,
// {_id: "<limit>/<key>", tat, exp}, holding the key's theoretical arrival time (GCRA,
// ratelimit.Limit.Decide) in Unix milliseconds. One findAndModify with a pipeline update decides
// and writes atomically on the primary, so N processes together allow what one would. exp (a
// date, TTL-indexed) is when the bucket is full again: from then on the document says nothing
// a missing one would not, and MongoDB deletes it.

type rateDoc struct {
	TAT int64 `bson:"tat"`
	OK  bool  `bson:"ok"`
}

// RateLimits is the shared limiter.
type RateLimits Store

// RateLimits returns the store's shared rate limiter.
func (s *Store) RateLimits() *RateLimits { return (*RateLimits)(s) }

// Allow counts one request of key against limit name l at now.
func (r *RateLimits) Allow(ctx context.Context, name string, l ratelimit.Limit, key string, now time.Time) (bool, time.Duration, error) {
	if l.Off() {
		return true, 0, nil
	}
	nowMS := now.UnixMilli()
	interval, tolerance := l.Interval().Milliseconds(), l.Tolerance().Milliseconds()
	tat := d(e("$max", bson.A{d(e("$ifNull", bson.A{"$tat", nowMS})), nowMS}))
	ok := d(e("$lte", bson.A{d(e("$subtract", bson.A{tat, nowMS})), tolerance}))
	next := d(e("$cond", bson.A{ok, d(e("$add", bson.A{tat, interval})), tat}))
	update := bson.A{
		d(e("$set", d(e("ok", ok), e("tat", next)))),
		d(e("$set", d(e("exp", d(e("$toDate", "$tat")))))),
	}
	var doc rateDoc
	err := (*Store)(r).coll(collRateLimits).FindOneAndUpdate(ctx, d(e("_id", name+"/"+key)), update,
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return false, 0, fmt.Errorf("mongo: rate limit %s: %w", name, err)
	}
	if doc.OK {
		return true, 0, nil
	}
	return false, time.Duration(doc.TAT-nowMS-tolerance) * time.Millisecond, nil
}
