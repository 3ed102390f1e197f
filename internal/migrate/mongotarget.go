package migrate

// Moving sessions, carts, history and events from the embedded store into MongoDB (a replica
// set or a mongos), with the migration's own state in the same database. The documents are
// mongostore's (its encoders), in the collections mongostore.Open creates with the indexes of
// the sharding spec, so the moved shop reads them with mongostore.
//
// Ordering with later writes: MongoDB keeps no per-cell write time, so every write of the
// migration is a conditional upsert on a version, and a write whose condition fails has lost:
//
//   - sessions and carts carry versionField, the row's Modified in µs: a backfilled row is
//     written at its last change in the embedded store (Row.Modified), a dual write
//     (MongoMirror) at the time it read the embedded store, always later. The upsert's filter
//     is {_id, version < v}: on a newer document the filter misses, the upsert tries to insert
//     the same _id and gets a duplicate key, which is the "keep" outcome, so a backfill read
//     before a dual write never overwrites it, whichever lands last.
//   - a cart lives at one of two _ids (its owner's slot while active, its own id once ordered
//     or abandoned: mongostore's layout), so one condition cannot order two copies of it:
//     after writing carts, a write reads their other _ids: an older copy there is deleted, a
//     newer one deletes the copy just written (reconcileCarts). Whichever of two copies lands
//     last sees the other and the newest survives alone.
//   - history is versioned by its own updated_at, the rule mongostore's UpsertEntry applies
//     (the shop's dual write of an entry is UpsertEntry itself).
//   - events never change: an insert on the deterministic _id, a duplicate being the same event.
//
// Deletes: a session revoked (or a cart purged) in the embedded store while the backfill runs
// leaves no document for a version to be compared with, so the dual write records a tombstone
// (tombstonesCollection: family/key and the delete's time) before deleting the document where
// its version is older. The backfill writes a range, then deletes every document of it that a
// tombstone is newer than. Whichever of the two reaches MongoDB first, the key ends up deleted:
// either the backfill's check sees the tombstone, or the tombstone was written after the check
// and so after the backfilled document, which the dual write's delete then removes. Reads and
// writes are on the primary at majority, so the check reads every tombstone acknowledged
// before it. Verify compares both sides, and `verify --repair` copies any key again with the
// dual write's rule.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// The migration's own collections in the shop's database.
const (
	stateCollection       = "migration_state"       // _id: family
	runsCollection        = "migration_runs"        // _id: run/family, the split points
	checkpointsCollection = "migration_checkpoints" // _id: run/family/range id
	writersCollection     = "migration_writers"     // _id: family/writer, the shop's heartbeats
	tombstonesCollection  = "migration_tombstones"  // _id: family/key, a delete's time
	// versionField is a migrated session's version (µs): the time of the change it holds.
	versionField = "migration_version"
	// writerTTL is how long a heartbeat counts (a shop process beats every poll, 2 s).
	writerTTL = 15 * time.Second
)

// MongoFamilies are the families that move to MongoDB with dual writes.
var MongoFamilies = family.ToMongoDualWrite()

// MongoTarget writes families into the shop's MongoDB database through the shop's own
// document shapes, and keeps the migration's state there.
type MongoTarget struct {
	db *mongo.Database
	// Retention is how long events live after their time (0: event.DefaultRetention).
	Retention time.Duration
}

// NewMongoTarget uses st's database: its schema (collections, indexes, shard keys' indexes)
// is the one mongostore.Open ensures.
func NewMongoTarget(st *mongostore.Store) *MongoTarget {
	db := st.Database().Client().Database(st.Database().Name(), options.Database().
		SetWriteConcern(writeconcern.Majority()).SetReadConcern(readconcern.Majority()).SetReadPreference(readpref.Primary()))
	return &MongoTarget{db: db}
}

// OpenMongoTarget opens the shop's database at uri (creating the schema mongostore wants) and
// the migration's indexes.
func OpenMongoTarget(ctx context.Context, uri, database string) (*MongoTarget, func(), error) {
	st, err := mongostore.Open(ctx, mongostore.Options{URI: uri, Database: database})
	if err != nil {
		return nil, nil, fmt.Errorf("migrate: open the mongo target: %w", err)
	}
	t := NewMongoTarget(st)
	_, err = t.db.Collection(writersCollection).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "seen_at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(int32(4 * writerTTL / time.Second))})
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("migrate: create the heartbeats' TTL index: %w", err)
	}
	return t, func() { _ = st.Close() }, nil
}

func mongoFamilyOK(f Family) error {
	for _, m := range MongoFamilies {
		if m == f {
			return nil
		}
	}
	return fmt.Errorf("migrate: family %q does not move to mongo with dual writes; want one of %s", f, family.Join(MongoFamilies))
}

// Write upserts rows under the ordering rule of the package comment and returns how many it
// skipped as expired. Writing a range again changes nothing.
func (t *MongoTarget) Write(ctx context.Context, f Family, rows []Row, now time.Time) (int, error) {
	if err := mongoFamilyOK(f); err != nil {
		return 0, err
	}
	fam, _ := codecOf(f)
	var models []mongo.WriteModel
	var written []Row
	skipped := 0
	for _, r := range rows {
		if !fam.holds(r) {
			return skipped, fmt.Errorf("migrate: write %s %s: row is not a %s row", f, r.Key, f)
		}
		if ttlLeft(r.Expires, now) < 0 {
			skipped++
			continue
		}
		m, err := t.model(f, r)
		if err != nil {
			return skipped, fmt.Errorf("migrate: write %s %s: %w", f, r.Key, err)
		}
		models = append(models, m)
		written = append(written, r)
	}
	if len(models) == 0 {
		return skipped, nil
	}
	_, err := t.db.Collection(fam.mongo().coll).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	if err = keepNewer(err); err != nil {
		return skipped, fmt.Errorf("migrate: write %s: %w", f, err)
	}
	if f == Carts {
		if err := t.reconcileCarts(ctx, written); err != nil {
			return skipped, err
		}
	}
	if f == Sessions || f == Carts {
		if err := t.applyTombstones(ctx, f, written); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// model is r's conditional upsert (insert for an event).
func (t *MongoTarget) model(f Family, r Row) (mongo.WriteModel, error) {
	switch f {
	case Sessions:
		doc, err := versioned(mongostore.SessionDocument(*r.Session), r.Modified)
		if err != nil {
			return nil, err
		}
		return mongo.NewReplaceOneModel().SetFilter(olderThan(bson.D{{Key: "_id", Value: r.Key}}, r.Modified)).
			SetReplacement(doc).SetUpsert(true), nil
	case Carts:
		here, _ := cartPlaces(*r.Cart)
		doc, err := versioned(mongostore.CartDocument(*r.Cart, here != r.Key), r.Modified)
		if err != nil {
			return nil, err
		}
		return mongo.NewReplaceOneModel().SetFilter(olderThan(bson.D{{Key: "_id", Value: here}}, r.Modified)).
			SetReplacement(doc).SetUpsert(true), nil
	case History:
		doc, key := mongostore.HistoryDocument(*r.Entry)
		filter := append(key, bson.E{Key: "updated_at", Value: bson.D{{Key: "$lte", Value: r.Entry.UpdatedAt}}})
		return mongo.NewReplaceOneModel().SetFilter(filter).SetReplacement(doc).SetUpsert(true), nil
	default: // Events
		doc, err := mongostore.EventDocument(*r.Event)
		if err != nil {
			return nil, err
		}
		return mongo.NewInsertOneModel().SetDocument(doc), nil
	}
}

// versioned is doc with versionField = v (µs).
func versioned(doc any, v time.Time) (bson.D, error) {
	raw, err := bson.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	return append(d, bson.E{Key: versionField, Value: v.UnixMicro()}), nil
}

// olderThan narrows filter to a document whose version is before v, or that has none (one the
// shop wrote on MongoDB while the family was cut over, before a rollback).
func olderThan(filter bson.D, v time.Time) bson.D {
	return append(filter, bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: versionField, Value: bson.D{{Key: "$lt", Value: v.UnixMicro()}}}},
		bson.D{{Key: versionField, Value: bson.D{{Key: "$exists", Value: false}}}},
	}})
}

// keepNewer drops the duplicate-key answers of a bulk write: each is an upsert that found a
// newer document (or an event already there), the outcome the ordering rule wants.
func keepNewer(err error) error {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		return err
	}
	if bwe.WriteConcernError != nil {
		return err
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return err
		}
	}
	return nil
}

func tombstoneID(f Family, key string) string { return string(f) + "/" + key }

// cartPlaces are the _ids a cart can be stored at: here, where its state puts it (the owner's
// slot while it is the active cart, else its own id, "retired"), and the other one.
func cartPlaces(c cart.Cart) (here, other string) {
	slot := mongostore.ActiveCartSlot(c.Owner)
	if c.Status == cart.Active {
		return slot, c.ID
	}
	return c.ID, slot
}

// reconcileCarts keeps one copy of each cart of rows, the newest: a cart moves between its
// owner's slot and its own id as its status changes, and the two writes are not ordered by a
// condition on one document. After writing the carts, it reads their other places in one query;
// an older copy there is deleted, and a newer one there deletes the copy just written. A dual
// write takes the same steps, so whichever of two copies is written last finds the other one.
func (t *MongoTarget) reconcileCarts(ctx context.Context, rows []Row) error {
	want := make(map[string]Row, len(rows)) // by the other place's _id and cart id
	others := make(bson.A, 0, len(rows))
	for _, r := range rows {
		_, other := cartPlaces(*r.Cart)
		want[other+"\x00"+r.Key] = r
		others = append(others, other)
	}
	coll := t.db.Collection(mongostore.CartsCollection)
	cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: others}}}},
		options.Find().SetProjection(bson.D{{Key: "cart_id", Value: 1}, {Key: versionField, Value: 1}}))
	if err != nil {
		return fmt.Errorf("migrate: read the carts' other places: %w", err)
	}
	var found []struct {
		ID      string `bson:"_id"`
		CartID  string `bson:"cart_id"`
		Version int64  `bson:"migration_version"`
	}
	if err := cur.All(ctx, &found); err != nil {
		return fmt.Errorf("migrate: read the carts' other places: %w", err)
	}
	for _, d := range found {
		r, ok := want[d.ID+"\x00"+d.CartID]
		if !ok {
			continue // the slot holds another cart of the owner
		}
		here, other := cartPlaces(*r.Cart)
		del, before := other, r.Modified // an older copy at the other place
		if d.Version > r.Modified.UnixMicro() {
			del, before = here, time.UnixMicro(d.Version) // a newer one there: this copy goes
		}
		if _, err := coll.DeleteOne(ctx, olderThan(bson.D{{Key: "_id", Value: del}, {Key: "cart_id", Value: r.Key}}, before)); err != nil {
			return fmt.Errorf("migrate: move cart %s: %w", r.Key, err)
		}
	}
	return nil
}

// applyTombstones deletes each of rows whose key a newer tombstone marks as deleted.
func (t *MongoTarget) applyTombstones(ctx context.Context, f Family, rows []Row) error {
	ids := make(bson.A, len(rows))
	for i, r := range rows {
		ids[i] = tombstoneID(f, r.Key)
	}
	cur, err := t.db.Collection(tombstonesCollection).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return fmt.Errorf("migrate: read %s tombstones: %w", f, err)
	}
	var stones []struct {
		Key  string `bson:"key"`
		Slot string `bson:"slot"`
		At   int64  `bson:"at"`
	}
	if err := cur.All(ctx, &stones); err != nil {
		return fmt.Errorf("migrate: read %s tombstones: %w", f, err)
	}
	for _, s := range stones {
		if err := t.deleteOlder(ctx, f, s.Key, s.Slot, time.UnixMicro(s.At)); err != nil {
			return err
		}
	}
	return nil
}

// deleteOlder deletes key's documents whose version is before at: a session's; a cart's at
// its own id and in slot, its owner's slot, if it is there.
func (t *MongoTarget) deleteOlder(ctx context.Context, f Family, key, slot string, at time.Time) error {
	fam, _ := codecOf(f)
	filter := bson.D{{Key: "_id", Value: key}}
	if f == Carts {
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{key, slot}}}}, {Key: "cart_id", Value: key}}
	}
	if _, err := t.db.Collection(fam.mongo().coll).DeleteMany(ctx, olderThan(filter, at)); err != nil {
		return fmt.Errorf("migrate: delete %s %s: %w", f, key, err)
	}
	return nil
}

// deleteAt records that key was deleted at at (keeping the later of two tombstones), then
// deletes its documents where older: the dual write's half of the delete rule. slot is a
// cart's owner's slot ("" for a session).
func (t *MongoTarget) deleteAt(ctx context.Context, f Family, key, slot string, at time.Time) error {
	_, err := t.db.Collection(tombstonesCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: tombstoneID(f, key)}},
		bson.D{{Key: "$max", Value: bson.D{{Key: "at", Value: at.UnixMicro()}}}, {Key: "$set", Value: bson.D{{Key: "key", Value: key}, {Key: "slot", Value: slot}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("migrate: tombstone %s %s: %w", f, key, err)
	}
	return t.deleteOlder(ctx, f, key, slot, at)
}

// Scan reads every document of f back, in the shape Reader.Read returns, for Verify.
func (t *MongoTarget) Scan(ctx context.Context, f Family, fn func(Row) error) error {
	if err := mongoFamilyOK(f); err != nil {
		return err
	}
	fam, _ := codecOf(f)
	cur, err := t.db.Collection(fam.mongo().coll).Find(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("migrate: scan %s: %w", f, err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		row, _, err := fam.decodeMongo(cur.Current)
		if err != nil {
			return fmt.Errorf("migrate: scan %s: %w", f, err)
		}
		fam.stamp(&row, t.Retention)
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("migrate: scan %s: %w", f, err)
	}
	return nil
}

// Plan returns the split points of run's ranges for f, fixing them with points at the first
// start (an insert: a second start finds the first's).
func (t *MongoTarget) Plan(ctx context.Context, run string, f Family, points []string) ([]string, error) {
	if points == nil {
		points = []string{}
	}
	id := run + "/" + string(f)
	_, err := t.db.Collection(runsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "run", Value: run},
		{Key: "family", Value: string(f)}, {Key: "points", Value: points}, {Key: "started_at", Value: time.Now().UTC()}})
	if err == nil {
		return points, nil
	}
	if !mongo.IsDuplicateKeyError(err) {
		return nil, fmt.Errorf("migrate: fix the ranges of run %s: %w", run, err)
	}
	got, _, err := t.readPlan(ctx, id)
	return got, err
}

func (t *MongoTarget) readPlan(ctx context.Context, id string) (points []string, found bool, err error) {
	var doc struct {
		Points []string `bson:"points"`
	}
	err = t.db.Collection(runsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("migrate: read the ranges of %s: %w", id, err)
	}
	return doc.Points, true, nil
}

// PlannedRanges is the number of ranges run cut f into (0 before it started).
func (t *MongoTarget) PlannedRanges(ctx context.Context, run string, f Family) (int, error) {
	points, found, err := t.readPlan(ctx, run+"/"+string(f))
	if err != nil || !found {
		return 0, err
	}
	return len(points) + 1, nil
}

type checkpointDoc struct {
	ID      string    `bson:"_id"`
	Run     string    `bson:"run"`
	Family  string    `bson:"family"`
	RangeID int       `bson:"range_id"`
	Lo      string    `bson:"lo"`
	Hi      string    `bson:"hi"`
	Rows    int64     `bson:"rows"`
	Skipped int64     `bson:"skipped"`
	DoneAt  time.Time `bson:"done_at"`
}

// Checkpoints returns run's copied ranges of f by range id.
func (t *MongoTarget) Checkpoints(ctx context.Context, run string, f Family) (map[int]Checkpoint, error) {
	cur, err := t.db.Collection(checkpointsCollection).Find(ctx, bson.D{{Key: "run", Value: run}, {Key: "family", Value: string(f)}})
	if err != nil {
		return nil, fmt.Errorf("migrate: read checkpoints: %w", err)
	}
	var docs []checkpointDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("migrate: read checkpoints: %w", err)
	}
	out := make(map[int]Checkpoint, len(docs))
	for _, d := range docs {
		out[d.RangeID] = Checkpoint{Range: Range{ID: d.RangeID, Lo: d.Lo, Hi: d.Hi}, Rows: d.Rows, Skipped: d.Skipped, At: d.DoneAt}
	}
	return out, nil
}

func (t *MongoTarget) checkpoint(ctx context.Context, run string, f Family, c Checkpoint) error {
	d := checkpointDoc{ID: fmt.Sprintf("%s/%s/%d", run, f, c.Range.ID), Run: run, Family: string(f), RangeID: c.Range.ID,
		Lo: c.Range.Lo, Hi: c.Range.Hi, Rows: c.Rows, Skipped: c.Skipped, DoneAt: c.At}
	_, err := t.db.Collection(checkpointsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, d, options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("migrate: checkpoint %s range %d: %w", f, c.Range.ID, err)
	}
	return nil
}

type stateDoc struct {
	Family     string     `bson:"_id"`
	Phase      string     `bson:"phase"`
	Source     string     `bson:"source"`
	Run        string     `bson:"run"`
	VerifiedAt *time.Time `bson:"verified_at,omitempty"`
	Rows       int64      `bson:"rows"`
	ChangedAt  time.Time  `bson:"changed_at"`
	Note       string     `bson:"note"`
}

// States returns every family's state; a family never migrated has PhaseNone.
func (t *MongoTarget) States(ctx context.Context) (map[Family]State, error) {
	out := map[Family]State{}
	for _, f := range MongoFamilies {
		out[f] = State{Family: f}
	}
	cur, err := t.db.Collection(stateCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("migrate: read migration state: %w", err)
	}
	var docs []stateDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("migrate: read migration state: %w", err)
	}
	for _, d := range docs {
		p, err := ParsePhase(d.Phase)
		if err != nil {
			continue // a newer version's phase: leave it to that version
		}
		s := State{Family: Family(d.Family), Phase: p, Source: d.Source, Run: d.Run, Rows: d.Rows, ChangedAt: d.ChangedAt.UTC(), Note: d.Note}
		if d.VerifiedAt != nil {
			s.VerifiedAt = d.VerifiedAt.UTC()
		}
		out[s.Family] = s
	}
	return out, nil
}

// State returns family f's state.
func (t *MongoTarget) State(ctx context.Context, f Family) (State, error) {
	return stateIn(ctx, t.States, f)
}

// SetState moves f from phase `from` to s.Phase, compare-and-set on the phase (an insert for
// a family with none), so two operators cannot both move it: ErrPhase says where it stands.
func (t *MongoTarget) SetState(ctx context.Context, from Phase, s State) error {
	if s.ChangedAt.IsZero() {
		s.ChangedAt = time.Now().UTC()
	}
	d := stateDoc{Family: string(s.Family), Phase: string(s.Phase), Source: s.Source, Run: s.Run, Rows: s.Rows, ChangedAt: s.ChangedAt, Note: s.Note}
	if !s.VerifiedAt.IsZero() {
		v := s.VerifiedAt.UTC()
		d.VerifiedAt = &v
	}
	coll := t.db.Collection(stateCollection)
	applied := true
	if from == PhaseNone {
		_, err := coll.InsertOne(ctx, d)
		if mongo.IsDuplicateKeyError(err) {
			applied = false
		} else if err != nil {
			return fmt.Errorf("migrate: set %s to %s: %w", s.Family, s.Phase, err)
		}
	} else {
		res, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: d.Family}, {Key: "phase", Value: string(from)}}, d)
		if err != nil {
			return fmt.Errorf("migrate: set %s to %s: %w", s.Family, s.Phase, err)
		}
		applied = res.MatchedCount == 1
	}
	if !applied {
		cur, err := t.State(ctx, s.Family)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is in phase %q, not %q", ErrPhase, s.Family, cur.Phase, from)
	}
	return nil
}

// Heartbeat records that writer applies phase p to f (it counts for writerTTL).
func (t *MongoTarget) Heartbeat(ctx context.Context, f Family, writer string, p Phase) error {
	_, err := t.db.Collection(writersCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: string(f) + "/" + writer}},
		bson.D{{Key: "family", Value: string(f)}, {Key: "writer", Value: writer}, {Key: "phase", Value: string(p)}, {Key: "seen_at", Value: time.Now().UTC()}},
		options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("migrate: heartbeat: %w", err)
	}
	return nil
}

// Writers lists the shop processes of f that beat within writerTTL, by id.
func (t *MongoTarget) Writers(ctx context.Context, f Family) ([]Writer, error) {
	cur, err := t.db.Collection(writersCollection).Find(ctx, bson.D{{Key: "family", Value: string(f)},
		{Key: "seen_at", Value: bson.D{{Key: "$gt", Value: time.Now().UTC().Add(-writerTTL)}}}})
	if err != nil {
		return nil, fmt.Errorf("migrate: read writers: %w", err)
	}
	var docs []struct {
		Writer string    `bson:"writer"`
		Phase  string    `bson:"phase"`
		SeenAt time.Time `bson:"seen_at"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("migrate: read writers: %w", err)
	}
	out := make([]Writer, len(docs))
	for i, d := range docs {
		out[i] = Writer{ID: d.Writer, Phase: Phase(d.Phase), SeenAt: d.SeenAt.UTC()}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// BeginCopy is Target.BeginCopy with the state in MongoDB.
func (t *MongoTarget) BeginCopy(ctx context.Context, f Family, source, run string, offline bool) (CopyStart, error) {
	if err := mongoFamilyOK(f); err != nil {
		return CopyStart{}, err
	}
	return beginCopy(ctx, t, f, source, run, offline)
}

// FinishCopy moves st's family from dual_write to copied.
func (t *MongoTarget) FinishCopy(ctx context.Context, st State) error { return finishCopy(ctx, t, st) }

// MarkVerified is Target.MarkVerified with the state in MongoDB.
func (t *MongoTarget) MarkVerified(ctx context.Context, f Family, rows int64) (bool, error) {
	return markVerified(ctx, t, f, rows)
}

// Cutover moves f from verified to cutover: shop processes serve it from MongoDB.
func (t *MongoTarget) Cutover(ctx context.Context, f Family) (State, error) {
	return move(ctx, t, f, Verified, Cutover, cutoverWhy, "")
}

// Rollback moves f from cutover back to copied: the old store serves it again.
func (t *MongoTarget) Rollback(ctx context.Context, f Family) (State, error) {
	return move(ctx, t, f, Cutover, Copied, rollbackWhy, rollbackNote())
}

// WaitWriters is Target.WaitWriters with the heartbeats in MongoDB.
func (t *MongoTarget) WaitWriters(ctx context.Context, f Family, poll time.Duration, want ...Phase) ([]Writer, error) {
	return waitWriters(ctx, t, f, poll, want...)
}

// Repair copies each differing key again from the old store with the dual write's rule.
func (t *MongoTarget) Repair(ctx context.Context, src MirrorSource, f Family, diffs []Diff) error {
	m := &MongoMirror{Src: src, Dst: t}
	for _, d := range diffs {
		if err := m.Keys(ctx, f, d.Key); err != nil {
			return fmt.Errorf("repair %s %s: %w", f, d.Key, err)
		}
	}
	return nil
}
