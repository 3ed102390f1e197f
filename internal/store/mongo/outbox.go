package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/outbox"
)

// The outbox is a collection of {_id: seq, topic, key, payload, at}. seq comes from one counter
// document ({_id: "outbox", seq}) incremented inside the same transaction as the change and the
// outbox row. Two transactions that both append touch the counter, so the second one hits a
// write conflict (TransientTransactionError) and re-runs after the first commits: seq order IS
// commit order and an aborted transaction leaves no gap. The price is contention: every
// transaction that writes the outbox serialises on that one document, i.e. on one shard's
// primary, which caps order throughput at roughly one commit per counter round trip. The
// alternatives (per-key counters, a change-stream-fed log, cluster time as seq) either lose the
// single total order the projector checkpoints against or cannot be read in commit order. Keep
// outbox and counters unsharded: both then live on the database's primary shard and commit there
// atomically, so a reader that sees seq n+1 also sees n.
const outboxCounterID = "outbox"

type outboxDoc struct {
	Seq     int64     `bson:"_id"`
	Topic   string    `bson:"topic"`
	Key     string    `bson:"key"`
	Payload []byte    `bson:"payload"`
	At      time.Time `bson:"at"`
}

type counterDoc struct {
	Seq int64 `bson:"seq"`
}

// counterUpdate takes the next sequence number.
var counterUpdate = d(e("$inc", d(e("seq", int64(1)))))

// appendOutbox writes one message; ctx must carry the transaction's session.
func (s *Store) appendOutbox(ctx context.Context, topic, key string, payload []byte, at time.Time) error {
	var c counterDoc
	err := s.coll(collCounters).FindOneAndUpdate(ctx, d(e("_id", outboxCounterID)), counterUpdate,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return errors.New("mongo: outbox counter missing: run EnsureSchema (Open does)")
	}
	if err != nil {
		return fmt.Errorf("mongo: outbox seq: %w", err)
	}
	if _, err := s.coll(collOutbox).InsertOne(ctx, outboxDoc{Seq: c.Seq, Topic: topic, Key: key, Payload: payload, At: at}); err != nil {
		return fmt.Errorf("mongo: append outbox %s: %w", topic, err)
	}
	return nil
}

type outboxLog Store

func (l *outboxLog) ReadOutbox(ctx context.Context, after int64, limit int) ([]outbox.Message, error) {
	cur, err := (*Store)(l).outboxReader(collOutbox).Find(ctx, d(e("_id", d(e("$gt", after)))),
		options.Find().SetSort(d(e("_id", 1))).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("mongo: read outbox: %w", err)
	}
	var docs []outboxDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongo: read outbox: %w", err)
	}
	out := make([]outbox.Message, len(docs))
	for i, m := range docs {
		out[i] = outbox.Message{Seq: m.Seq, Topic: m.Topic, Key: m.Key, Payload: m.Payload, At: m.At.UTC()}
	}
	return out, nil
}

type checkpointDoc struct {
	Seq int64 `bson:"seq"`
}

func (l *outboxLog) Checkpoint(ctx context.Context, consumer string) (int64, error) {
	var c checkpointDoc
	err := (*Store)(l).outboxReader(collCheckpoints).FindOne(ctx, d(e("_id", consumer))).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mongo: read checkpoint %s: %w", consumer, err)
	}
	return c.Seq, nil
}

func (l *outboxLog) SaveCheckpoint(ctx context.Context, consumer string, seq int64) error {
	_, err := (*Store)(l).coll(collCheckpoints).UpdateOne(ctx, d(e("_id", consumer)),
		d(e("$set", d(e("seq", seq)))), options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("mongo: save checkpoint %s: %w", consumer, err)
	}
	return nil
}

// LastSeq reads the counter: it commits with the rows, so it is never below a visible seq.
func (l *outboxLog) LastSeq(ctx context.Context) (int64, error) {
	var c counterDoc
	err := (*Store)(l).outboxReader(collCounters).FindOne(ctx, d(e("_id", outboxCounterID))).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mongo: read outbox counter: %w", err)
	}
	return c.Seq, nil
}

// decodeOne runs a findOne/findAndModify result into v, reporting found=false for no document.
func decodeOne(res *mongo.SingleResult, v any) (bool, error) {
	err := res.Decode(v)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, err
}
