package mongostore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/outbox"
)

// The outbox is partitioned (outbox.Partitioned): a message goes to partition
// fnv32a(key) mod OutboxPartitions, and each partition has its own counter document
// ({_id: "outbox/<p>", seq}) and rows {p, seq, topic, key, payload, at}, unique on {p, seq}.
// The counter is incremented inside the same transaction as the change and the row, so two
// transactions appending to one partition conflict on its counter (TransientTransactionError)
// and the second re-runs after the first commits: within a partition seq order IS commit order
// and an aborted transaction leaves no gap. The messages of one key (an order's placed and
// status events) share a partition and stay in order; messages of different keys need none.
//
// Why partitions: with one counter for the whole outbox, every order transaction in the
// cluster serialised on one document on one shard's primary, and every order became a
// cross-shard commit that always included that shard: a hot spot by design. With P partitions
// contention drops P-fold and, sharded as ShardKeys says (outbox on {p, seq}, counters on
// {_id: hashed}), the partitions spread over the shards. docs/evidence/benchmarks.md has orders/s before
// and after on a real replica set.
//
// A reader of one partition that sees seq n+1 also sees n: n's transaction committed (w:
// majority) before n+1 could take the counter, and the projector reads at majority.
//
// The partition count is fixed for a database's life (recorded in counters as
// {_id: "outbox/partitions", n}): changing it would move keys between partitions and could
// reorder one key's messages.
const DefaultOutboxPartitions = 16

const partitionsDocID = "outbox/partitions"

const outboxCounterPrefix = "outbox/"

type outboxDoc struct {
	Partition int32     `bson:"p"`
	Seq       int64     `bson:"seq"`
	Topic     string    `bson:"topic"`
	Key       string    `bson:"key"`
	Payload   []byte    `bson:"payload"`
	At        time.Time `bson:"at"`
}

type counterDoc struct {
	Seq int64 `bson:"seq"`
}

// counterUpdate takes the next sequence number.
var counterUpdate = d(e("$inc", d(e("seq", int64(1)))))

// outboxPartition is the partition of a message key.
func (s *Store) outboxPartition(key string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int32(h.Sum32() % uint32(s.partitions))
}

func counterID(p int32) string { return outboxCounterPrefix + strconv.Itoa(int(p)) }

// appendOutbox writes one message; ctx must carry the transaction's session.
func (s *Store) appendOutbox(ctx context.Context, topic, key string, payload []byte, at time.Time) error {
	p := s.outboxPartition(key)
	var c counterDoc
	err := s.coll(collCounters).FindOneAndUpdate(ctx, d(e("_id", counterID(p))), counterUpdate,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("mongo: outbox counter %s missing: run EnsureSchema (Open does)", counterID(p))
	}
	if err != nil {
		return fmt.Errorf("mongo: outbox seq: %w", err)
	}
	doc := outboxDoc{Partition: p, Seq: c.Seq, Topic: topic, Key: key, Payload: payload, At: at}
	if _, err := s.coll(collOutbox).InsertOne(ctx, doc); err != nil {
		return fmt.Errorf("mongo: append outbox %s: %w", topic, err)
	}
	return nil
}

// pendingMessage is a message not yet given its partition and seq.
type pendingMessage struct {
	topic, key string
	payload    []byte
	at         time.Time
}

// appendOutboxMany writes many messages; ctx must carry the transaction's session. Each
// partition's counter moves once, by the number of its messages, which keep their given order.
func (s *Store) appendOutboxMany(ctx context.Context, msgs []pendingMessage) error {
	byPart := map[int32][]pendingMessage{}
	var order []int32
	for _, m := range msgs {
		p := s.outboxPartition(m.key)
		if _, ok := byPart[p]; !ok {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], m)
	}
	for _, p := range order {
		ms := byPart[p]
		var c counterDoc
		err := s.coll(collCounters).FindOneAndUpdate(ctx, d(e("_id", counterID(p))), d(e("$inc", d(e("seq", int64(len(ms)))))),
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&c)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("mongo: outbox counter %s missing: run EnsureSchema (Open does)", counterID(p))
		}
		if err != nil {
			return fmt.Errorf("mongo: outbox seq: %w", err)
		}
		docs := make([]any, len(ms))
		first := c.Seq - int64(len(ms)) + 1
		for i, m := range ms {
			docs[i] = outboxDoc{Partition: p, Seq: first + int64(i), Topic: m.topic, Key: m.key, Payload: m.payload, At: m.at}
		}
		if _, err := s.coll(collOutbox).InsertMany(ctx, docs); err != nil {
			return fmt.Errorf("mongo: append outbox partition %d: %w", p, err)
		}
	}
	return nil
}

// outboxLog is the whole outbox: its partitions are what the projector reads.
type outboxLog Store

var _ outbox.Positions = (*outboxLog)(nil)

var errPartitioned = errors.New("mongo: the outbox is partitioned: read each of outbox.Parts(log)")

// Partitions returns one Log per partition.
func (l *outboxLog) Partitions() []outbox.Log {
	out := make([]outbox.Log, (*Store)(l).partitions)
	for p := range out {
		out[p] = outboxPart{s: (*Store)(l), p: int32(p)}
	}
	return out
}

func (l *outboxLog) ReadOutbox(context.Context, int64, int) ([]outbox.Message, error) {
	return nil, errPartitioned
}
func (l *outboxLog) Checkpoint(context.Context, string) (int64, error)  { return 0, errPartitioned }
func (l *outboxLog) DeleteOutbox(context.Context, int64) (int64, error) { return 0, errPartitioned }

// CountOutbox counts every partition's rows.
func (l *outboxLog) CountOutbox(ctx context.Context) (int64, error) {
	n, err := (*Store)(l).coll(collOutbox).CountDocuments(ctx, bson.D{})
	if err != nil {
		return 0, fmt.Errorf("mongo: count outbox: %w", err)
	}
	return n, nil
}
func (l *outboxLog) SaveCheckpoint(context.Context, string, int64) error {
	return errPartitioned
}

// LastSeq is the number of messages ever appended (the sum of the partitions' counters), which
// is what "is the store empty" and readiness ask.
func (l *outboxLog) LastSeq(ctx context.Context) (int64, error) {
	seqs, err := l.LastSeqs(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, n := range seqs {
		total += n
	}
	return total, nil
}

// LastSeqs reads every partition's counter in one query (outbox.Positions), from the primary
// at majority as each partition's LastSeq does.
func (l *outboxLog) LastSeqs(ctx context.Context) ([]int64, error) {
	return l.seqsByID(ctx, collCounters, func(p int32) string { return counterID(p) })
}

// Checkpoints reads consumer's checkpoint in every partition in one query (outbox.Positions).
func (l *outboxLog) Checkpoints(ctx context.Context, consumer string) ([]int64, error) {
	return l.seqsByID(ctx, collCheckpoints, func(p int32) string { return outboxPart{p: p}.checkpointID(consumer) })
}

// seqsByID reads the seq of the documents id(0)…id(partitions-1) of coll; a missing one is 0.
func (l *outboxLog) seqsByID(ctx context.Context, coll string, id func(p int32) string) ([]int64, error) {
	s := (*Store)(l)
	ids := make(bson.A, s.partitions)
	at := make(map[string]int, s.partitions)
	for p := range s.partitions {
		ids[p] = id(int32(p))
		at[ids[p].(string)] = p
	}
	cur, err := s.outboxReader(coll).Find(ctx, d(e("_id", d(e("$in", ids)))))
	if err != nil {
		return nil, fmt.Errorf("mongo: read %s: %w", coll, err)
	}
	var docs []struct {
		ID  string `bson:"_id"`
		Seq int64  `bson:"seq"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongo: read %s: %w", coll, err)
	}
	out := make([]int64, s.partitions)
	for _, doc := range docs {
		if p, ok := at[doc.ID]; ok {
			out[p] = doc.Seq
		}
	}
	return out, nil
}

// outboxPart is one partition, read in seq order from the primary at majority.
type outboxPart struct {
	s *Store
	p int32
}

func (o outboxPart) ReadOutbox(ctx context.Context, after int64, limit int) ([]outbox.Message, error) {
	cur, err := o.s.outboxReader(collOutbox).Find(ctx, d(e("p", o.p), e("seq", d(e("$gt", after)))),
		options.Find().SetSort(d(e("seq", 1))).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("mongo: read outbox partition %d: %w", o.p, err)
	}
	var docs []outboxDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongo: read outbox partition %d: %w", o.p, err)
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

// checkpointID keeps one checkpoint per consumer and partition.
func (o outboxPart) checkpointID(consumer string) string {
	return consumer + "/" + strconv.Itoa(int(o.p))
}

func (o outboxPart) Checkpoint(ctx context.Context, consumer string) (int64, error) {
	var c checkpointDoc
	err := o.s.outboxReader(collCheckpoints).FindOne(ctx, d(e("_id", o.checkpointID(consumer)))).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mongo: read checkpoint %s: %w", o.checkpointID(consumer), err)
	}
	return c.Seq, nil
}

// SaveCheckpoint only moves a checkpoint forward ($max): two drains of one consumer may finish
// out of order (several processes), and the slower must not take it back.
func (o outboxPart) SaveCheckpoint(ctx context.Context, consumer string, seq int64) error {
	_, err := o.s.coll(collCheckpoints).UpdateOne(ctx, d(e("_id", o.checkpointID(consumer))),
		d(e("$max", d(e("seq", seq)))), options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("mongo: save checkpoint %s: %w", o.checkpointID(consumer), err)
	}
	return nil
}

// LastSeq reads the partition's counter: it commits with the rows, so it is never below a
// visible seq.
func (o outboxPart) LastSeq(ctx context.Context) (int64, error) {
	var c counterDoc
	err := o.s.outboxReader(collCounters).FindOne(ctx, d(e("_id", counterID(o.p)))).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mongo: read outbox counter %s: %w", counterID(o.p), err)
	}
	return c.Seq, nil
}

// CountOutbox counts the partition's rows (the {p, seq} index covers it).
func (o outboxPart) CountOutbox(ctx context.Context) (int64, error) {
	n, err := o.s.coll(collOutbox).CountDocuments(ctx, d(e("p", o.p)))
	if err != nil {
		return 0, fmt.Errorf("mongo: count outbox partition %d: %w", o.p, err)
	}
	return n, nil
}

// DeleteOutbox deletes the partition's rows through a seq with one deleteMany: the rows are
// consumed, nothing else reads them, so no transaction is needed (a partial delete is retried
// by the next prune). Majority write concern, like every write of the store.
func (o outboxPart) DeleteOutbox(ctx context.Context, through int64) (int64, error) {
	res, err := o.s.coll(collOutbox).DeleteMany(ctx, d(e("p", o.p), e("seq", d(e("$lte", through)))))
	if err != nil {
		return 0, fmt.Errorf("mongo: prune outbox partition %d through %d: %w", o.p, through, err)
	}
	return res.DeletedCount, nil
}

// decodeOne runs a findOne/findAndModify result into v, reporting found=false for no document.
func decodeOne(res *mongo.SingleResult, v any) (bool, error) {
	err := res.Decode(v)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	return err == nil, err
}

// The drain lease (outbox.Leaser): one document per consumer in outbox_checkpoints,
// {_id: "lease/<consumer>", holder, until}. Taking it is one findAndModify matching the
// document only when it is free, expired or already ours; when another holder's lease runs the
// upsert collides with the existing _id (duplicate key) and the lease is not taken.

type leaseDoc struct {
	Holder string    `bson:"holder"`
	Until  time.Time `bson:"until"`
}

func leaseID(consumer string) string { return "lease/" + consumer }

// AcquireLease implements outbox.Leaser.
func (l *outboxLog) AcquireLease(ctx context.Context, consumer, holder string, until time.Time) (bool, bool, error) {
	filter := d(e("_id", leaseID(consumer)), e("$or", bson.A{d(e("holder", holder)), d(e("until", d(e("$lt", time.Now()))))}))
	var before leaseDoc
	err := (*Store)(l).coll(collCheckpoints).FindOneAndUpdate(ctx, filter, d(e("$set", d(e("holder", holder), e("until", until)))),
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)).Decode(&before)
	switch {
	case mongo.IsDuplicateKeyError(err):
		return false, false, nil // another holder's lease runs
	case errors.Is(err, mongo.ErrNoDocuments):
		return true, false, nil // the first lease of this consumer
	case err != nil:
		return false, false, fmt.Errorf("mongo: acquire drain lease of %s: %w", consumer, err)
	}
	return true, before.Holder != "" && before.Holder != holder, nil
}

// ReleaseLease implements outbox.Leaser.
func (l *outboxLog) ReleaseLease(ctx context.Context, consumer, holder string) error {
	_, err := (*Store)(l).coll(collCheckpoints).UpdateOne(ctx, d(e("_id", leaseID(consumer)), e("holder", holder)),
		d(e("$set", d(e("holder", ""), e("until", time.Time{})))))
	if err != nil {
		return fmt.Errorf("mongo: release drain lease of %s: %w", consumer, err)
	}
	return nil
}
