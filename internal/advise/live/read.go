package live

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Options bound what Read reads.
type Options struct {
	// Sample is how many documents $sample reads (default 1000, at most MaxSample), capped at
	// 5 % of the collection and at maxSampleBytes.
	Sample int
	// MinDocs: a collection with fewer documents is refused as too small to say anything
	// (default 100).
	MinDocs int64
	// ProfileSeconds, when > 0, switches the database profiler on for that long (at most
	// MaxProfileSeconds; replica sets only) and back to its previous level.
	ProfileSeconds int
	// Wait waits out the profiler window; nil sleeps on ctx (tests may wait on a condition).
	Wait func(ctx context.Context, d time.Duration) error
}

// Bounds on what one advise run may cost the cluster.
const (
	MaxSample         = 10_000
	MaxProfileSeconds = 60
	defaultSample     = 1000
	defaultMinDocs    = 100
	// maxSampleBytes bounds the documents one run reads (sample and profiler entries each).
	maxSampleBytes = 256 << 20
)

// Reading is what Read found.
type Reading struct {
	NS        string
	Sharded   bool
	Key       sharding.Key // the current shard key; nil when unsharded
	Unique    bool         // the current key was sharded unique
	Shards    []string     // shard ids (sharded cluster), sorted
	ChunkSize int64        // bytes: the collection's, the cluster's or MongoDB's default

	NumDocs  int64 // numDocsTotal: documents, orphans excluded
	Orphans  int64 // numOrphanDocs, summed over the shards
	DataSize int64 // uncompressed bytes, orphans included
	PerShard map[string]ShardFigures

	// Docs is the $sample, in insertion order when InsertionOrder says so.
	Docs           []bson.Raw
	InsertionOrder string // how Docs were ordered; "" when the order is unknown

	Latency LatencyMix
	Profile *ProfileSample // nil unless asked
}

// ShardFigures is one shard's part of the collection, from $collStats on it.
type ShardFigures struct {
	Count, Size, Orphans int64
	Latency              LatencyMix
}

// LatencyMix is $collStats latencyStats: operation counts since the server started.
type LatencyMix struct {
	Reads        int64 `json:"reads"`
	Writes       int64 `json:"writes"`
	Commands     int64 `json:"commands"`
	Transactions int64 `json:"transactions"`
}

func (m *LatencyMix) add(o LatencyMix) {
	m.Reads += o.Reads
	m.Writes += o.Writes
	m.Commands += o.Commands
	m.Transactions += o.Transactions
}

// Read reads ns ("db.coll") from src within opts' bounds. A missing collection, one too
// small to say anything and a user without the roles it needs are refused with a *Refusal.
func Read(ctx context.Context, src Source, ns string, opts Options) (*Reading, error) {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok || db == "" || coll == "" {
		return nil, &Refusal{Msg: fmt.Sprintf("--collection %q: want db.collection", ns)}
	}
	if opts.Sample == 0 {
		opts.Sample = defaultSample
	}
	if opts.Sample < 1 || opts.Sample > MaxSample {
		return nil, &Refusal{Msg: fmt.Sprintf("--sample %d: want 1 to %d documents", opts.Sample, MaxSample)}
	}
	if opts.ProfileSeconds < 0 || opts.ProfileSeconds > MaxProfileSeconds {
		return nil, &Refusal{Msg: fmt.Sprintf("--profile-seconds %d: want 0 to %d", opts.ProfileSeconds, MaxProfileSeconds)}
	}
	if opts.MinDocs == 0 {
		opts.MinDocs = defaultMinDocs
	}
	r := &Reading{NS: ns, PerShard: map[string]ShardFigures{}}
	if err := r.readStats(ctx, src, db, coll); err != nil {
		return nil, err
	}
	if r.NumDocs < opts.MinDocs {
		return nil, &Refusal{Msg: fmt.Sprintf("%s holds %d documents: too few to say anything about a shard key (at least %d)", ns, r.NumDocs, opts.MinDocs)}
	}
	router, err := isRouter(ctx, src)
	if err != nil {
		return nil, err
	}
	r.ChunkSize = defaultChunkSize
	if router {
		if err := r.readMetadata(ctx, src); err != nil {
			return nil, err
		}
	}
	if opts.ProfileSeconds > 0 {
		if router {
			return nil, &Refusal{Msg: "--profile-seconds needs a replica set: a mongos cannot switch its shards' profilers (point --from at a shard's replica set)"}
		}
		p, err := profileSample(ctx, src, db, coll, time.Duration(opts.ProfileSeconds)*time.Second, opts.Wait)
		if err != nil {
			return nil, err
		}
		r.Profile = p
	}
	if err := r.readSample(ctx, src, db, coll, opts.Sample); err != nil {
		return nil, err
	}
	return r, nil
}

// readStats reads $collStats (storage and latency) once per shard (a mongos answers one
// document per shard, a replica set one).
func (r *Reading) readStats(ctx context.Context, src Source, db, coll string) error {
	res, err := src.Aggregate(ctx, db, coll, bson.A{bson.D{{Key: "$collStats", Value: bson.D{
		{Key: "storageStats", Value: bson.D{}},
		{Key: "latencyStats", Value: bson.D{{Key: "histograms", Value: false}}},
	}}}})
	if hasCode(err, codeNamespaceNotFound) || err == nil && len(res) == 0 {
		return &Refusal{Msg: fmt.Sprintf("collection %s not found", r.NS)}
	}
	if err != nil {
		return unauthorized(err, "read $collStats of "+r.NS)
	}
	for _, raw := range res {
		var st struct {
			Shard        string `bson:"shard"`
			StorageStats struct {
				Count         int64 `bson:"count"`
				Size          int64 `bson:"size"`
				NumOrphanDocs int64 `bson:"numOrphanDocs"`
			} `bson:"storageStats"`
			LatencyStats struct {
				Reads        struct{ Ops int64 } `bson:"reads"`
				Writes       struct{ Ops int64 } `bson:"writes"`
				Commands     struct{ Ops int64 } `bson:"commands"`
				Transactions struct{ Ops int64 } `bson:"transactions"`
			} `bson:"latencyStats"`
		}
		if err := bson.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("decode $collStats of %s: %w", r.NS, err)
		}
		ls := st.LatencyStats
		mix := LatencyMix{Reads: ls.Reads.Ops, Writes: ls.Writes.Ops, Commands: ls.Commands.Ops, Transactions: ls.Transactions.Ops}
		f := r.PerShard[st.Shard]
		f.Count += st.StorageStats.Count
		f.Size += st.StorageStats.Size
		f.Orphans += st.StorageStats.NumOrphanDocs
		f.Latency.add(mix)
		r.PerShard[st.Shard] = f
		r.NumDocs += st.StorageStats.Count - st.StorageStats.NumOrphanDocs
		r.Orphans += st.StorageStats.NumOrphanDocs
		r.DataSize += st.StorageStats.Size
		r.Latency.add(mix)
	}
	return nil
}

// defaultChunkSize is MongoDB's default range size.
const defaultChunkSize = 128 << 20

// isRouter reports whether src is a mongos (hello answers msg "isdbgrid"). A replica set has
// no sharding metadata to read, and needs no role for it.
func isRouter(ctx context.Context, src Source) (bool, error) {
	raw, err := src.RunCommand(ctx, "admin", bson.D{{Key: "hello", Value: int32(1)}})
	if err != nil {
		return false, fmt.Errorf("hello: %w", err)
	}
	msg, _ := raw.Lookup("msg").StringValueOK()
	return msg == "isdbgrid", nil
}

// readMetadata reads the current key and the shards from a mongos's config.* collections.
func (r *Reading) readMetadata(ctx context.Context, src Source) error {
	colls, err := src.Find(ctx, "config", "collections", bson.D{{Key: "_id", Value: r.NS}})
	if err != nil {
		return unauthorized(err, "read config.collections")
	}
	for _, raw := range colls {
		var e struct {
			Key               bson.D `bson:"key"`
			Unique            bool   `bson:"unique"`
			Unsplittable      bool   `bson:"unsplittable"`
			MaxChunkSizeBytes int64  `bson:"maxChunkSizeBytes"`
		}
		if err := bson.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decode config.collections %s: %w", r.NS, err)
		}
		if e.Unsplittable {
			continue
		}
		k, err := keyFromDoc(e.Key)
		if err != nil {
			return fmt.Errorf("config.collections %s: %w", r.NS, err)
		}
		r.Sharded, r.Key, r.Unique = true, k, e.Unique
		if e.MaxChunkSizeBytes > 0 {
			r.ChunkSize = e.MaxChunkSizeBytes
		}
	}
	shards, err := src.Find(ctx, "config", "shards", bson.D{})
	if err != nil {
		return unauthorized(err, "read config.shards")
	}
	for _, raw := range shards {
		if id, ok := raw.Lookup("_id").StringValueOK(); ok {
			r.Shards = append(r.Shards, id)
		}
	}
	slices.Sort(r.Shards)
	if r.Sharded && r.ChunkSize == defaultChunkSize {
		settings, err := src.Find(ctx, "config", "settings", bson.D{{Key: "_id", Value: "chunksize"}})
		if err != nil {
			return unauthorized(err, "read config.settings")
		}
		for _, raw := range settings {
			if mb, ok := raw.Lookup("value").AsInt64OK(); ok && mb > 0 {
				r.ChunkSize = mb << 20
			}
		}
	}
	return nil
}

// keyFromDoc turns {field: 1 | -1 | "hashed"} into sharding's key model.
func keyFromDoc(d bson.D) (sharding.Key, error) {
	var k sharding.Key
	for _, e := range d {
		f := sharding.KeyField{Name: e.Key, Kind: sharding.Ascending}
		switch v := e.Value.(type) {
		case string:
			if v != "hashed" {
				return nil, fmt.Errorf("key field %s: %q", e.Key, v)
			}
			f.Kind = sharding.Hashed
		case int32, int64, float64:
			if fmt.Sprint(v) == "-1" {
				f.Kind = sharding.Descending
			}
		default:
			return nil, fmt.Errorf("key field %s: %v", e.Key, v)
		}
		k = append(k, f)
	}
	return k, nil
}

// readSample reads up to n distinct documents with $sample and orders them by insertion when
// their _ids tell it. n is capped so the read stays cheap: at 5 % of the collection (under
// that MongoDB answers $sample from a random cursor; above it, it scans and sorts the whole
// collection) and at maxSampleBytes at the collection's average document size.
func (r *Reading) readSample(ctx context.Context, src Source, db, coll string, n int) error {
	n = r.sampleCap(n)
	docs, err := src.Aggregate(ctx, db, coll, bson.A{bson.D{{Key: "$sample", Value: bson.D{{Key: "size", Value: int32(n)}}}}})
	if err != nil {
		return unauthorized(err, "read "+r.NS)
	}
	if len(docs) == 0 {
		return &Refusal{Msg: fmt.Sprintf("%s: $sample returned no documents", r.NS)}
	}
	r.Docs, r.InsertionOrder = insertionOrder(dedupe(docs))
	return nil
}

// sampleCap is the sample size actually asked for n requested.
func (r *Reading) sampleCap(n int) int {
	n = min(n, max(1, int(r.NumDocs/20)))
	if r.NumDocs > 0 && r.DataSize > 0 {
		avg := max(1, r.DataSize/(r.NumDocs+r.Orphans))
		n = min(n, max(1, int(maxSampleBytes/avg)))
	}
	return n
}

// dedupe drops documents whose _id was already sampled: $sample's random cursor may return a
// document twice, and a sample counted twice skews the frequencies.
func dedupe(docs []bson.Raw) []bson.Raw {
	seen := map[string]bool{}
	return slices.DeleteFunc(docs, func(d bson.Raw) bool {
		id := d.Lookup("_id")
		k := string(append([]byte{byte(id.Type)}, id.Value...))
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}

// insertionOrder sorts docs by _id when every _id is an ObjectId and says so; otherwise docs
// keep $sample's order and the insertion order is unknown (""). ObjectIds made by drivers
// carry their creation second and a per-process counter, so for them _id order is insertion
// order to the second. The record id is not used: mongod 6.0 refuses {$meta: "recordId"}
// after $sample (code 40218), and through a mongos the sample does not say which shard a
// document came from (record ids are per shard, and renewed when the balancer moves a
// document). The consequence: {_id: 1}'s monotonicity is 1 by construction for ObjectIds.
func insertionOrder(docs []bson.Raw) ([]bson.Raw, string) {
	for _, d := range docs {
		if d.Lookup("_id").Type != bson.TypeObjectID {
			return docs, ""
		}
	}
	slices.SortStableFunc(docs, func(a, b bson.Raw) int {
		x, y := a.Lookup("_id").ObjectID(), b.Lookup("_id").ObjectID()
		return bytes.Compare(x[:], y[:])
	})
	return docs, "ObjectId _id"
}
