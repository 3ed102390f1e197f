// Package sharding is shardmart's MongoDB sharding spec as code: collections,
// shard keys, indexes and zones, the command documents that set them up, the
// mongosh rendering of those same documents (plan) and the idempotent runner
// (apply), plus balancer, zone, move-range and firehose administration.
//
// Every command is built as a bson.D by a pure function, so tests compare the
// exact documents and plan and apply can never disagree.
package sharding

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// DefaultDatabase is the database the spec shards unless told otherwise.
const DefaultDatabase = "shardmart"

// KeyKind is how one shard-key or index field is ordered.
type KeyKind int

const (
	Ascending KeyKind = iota
	Descending
	Hashed
)

// KeyField is one field of a shard key or index.
type KeyField struct {
	Name string
	Kind KeyKind
}

// Key is an ordered shard key or index key.
type Key []KeyField

// Doc is the key as MongoDB wants it: {field: 1 | -1 | "hashed", ...}.
func (k Key) Doc() bson.D {
	d := make(bson.D, 0, len(k))
	for _, f := range k {
		switch f.Kind {
		case Hashed:
			d = append(d, bson.E{Key: f.Name, Value: "hashed"})
		case Descending:
			d = append(d, bson.E{Key: f.Name, Value: int32(-1)})
		default:
			d = append(d, bson.E{Key: f.Name, Value: int32(1)})
		}
	}
	return d
}

// Names lists the key's fields in order.
func (k Key) Names() []string {
	out := make([]string, len(k))
	for i, f := range k {
		out[i] = f.Name
	}
	return out
}

// Hashed reports whether any field of the key is hashed.
func (k Key) Hashed() bool {
	return slices.ContainsFunc(k, func(f KeyField) bool { return f.Kind == Hashed })
}

// String renders the key in shell notation: { user_id: "hashed" }.
func (k Key) String() string { return shellValue(k.Doc()) }

// Index is a secondary (or shard-key) index the spec creates.
type Index struct {
	Name   string
	Key    Key
	Unique bool
	// TTL makes it a TTL index on a date field: documents expire ExpireAfter
	// past that date (0: at the date itself, the "expire at" pattern).
	TTL         bool
	ExpireAfter time.Duration
	// Partial is a partialFilterExpression, nil for none.
	Partial bson.D
	Why     string
}

// Doc is the index document of a createIndexes command.
func (ix Index) Doc() bson.D {
	d := bson.D{{Key: "key", Value: ix.Key.Doc()}, {Key: "name", Value: ix.Name}}
	if ix.Unique {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if ix.TTL {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: int32(ix.ExpireAfter / time.Second)})
	}
	if ix.Partial != nil {
		d = append(d, bson.E{Key: "partialFilterExpression", Value: ix.Partial})
	}
	return d
}

// FieldTraits describe a shard-key field for the SHD-6 rule checks.
type FieldTraits struct {
	// Array: documents may hold an array here (forbidden in a shard key).
	Array bool
	// LowCardinality: few distinct values (category, status, geo_zone).
	LowCardinality bool
	// Monotonic: grows with time (ObjectId, dates, counters).
	Monotonic bool
	// Nullable: many documents carry null/missing (guest carts' user_id).
	Nullable bool
	// Skewed: a few values hold much of the data (big categories, wholesale
	// buyers); a key ending in such a field cannot split them (jumbo chunks).
	Skewed bool
}

// Range is a zone range [Min, Max) over the full shard key.
type Range struct {
	Min, Max bson.D
	Zone     string
}

// Firehose pins the open-ended range [boundary, MaxKey) of an ascending key
// to a fast zone (the chapter's firehose strategy, SHD-4); everything below the
// boundary goes to Archive. A daily roll moves the boundary to today.
type Firehose struct {
	// Field is the ascending shard-key field (the key's first field).
	Field string
	// Zone receives all new writes; Archive holds older ranges.
	Zone, Archive string
	// Boundary turns a point in time into the field's value.
	Boundary func(t time.Time) any
}

// Collection is one sharded collection of the spec.
type Collection struct {
	Name string
	// Variant names the shard-key choice (SHD-2), e.g. "user_id_hashed".
	Variant string
	Key     Key
	Indexes []Index
	Traits  map[string]FieldTraits
	// Zone pins the whole key space to one zone (SHD-7 tier placement).
	Zone     string
	Firehose *Firehose
	Why      string
}

// Tier is a zone and the shards that serve it.
type Tier struct {
	Zone   string
	Shards []string
}

// Spec is the whole sharding layout of one database.
type Spec struct {
	Database    string
	Collections []Collection
	Tiers       []Tier
	// FirehoseStart is the initial firehose boundary for apply (normally
	// today, midnight UTC); the daily roll moves it forward.
	FirehoseStart time.Time
}

// Namespace is "db.collection".
func (s Spec) Namespace(coll string) string { return s.Database + "." + coll }

// Collection finds a collection of the spec by name.
func (s Spec) Collection(name string) (Collection, bool) {
	for _, c := range s.Collections {
		if c.Name == name {
			return c, true
		}
	}
	return Collection{}, false
}

// Ranges are the zone ranges apply creates for a collection.
func (s Spec) Ranges(c Collection) []Range {
	switch {
	case c.Firehose != nil:
		return FirehoseRanges(c, s.FirehoseStart)
	case c.Zone != "":
		return []Range{{Min: FillMin(c.Key, nil), Max: FillMax(c.Key, nil), Zone: c.Zone}}
	}
	return nil
}

// ErrUnknownVariant is returned for a shard-key variant the spec does not know.
var ErrUnknownVariant = errors.New("unknown shard-key variant")

// Options select the database, the shard-key variants and the shard tiers.
type Options struct {
	Database string
	// Variants maps collection → variant name; missing means the default.
	Variants map[string]string
	// Tiers maps zone → shards; nil means DefaultTiers: "fast" on shard1,
	// "standard" on shard2 (the local compose cluster's third shard, shard3,
	// serves no zone).
	Tiers map[string][]string
	// Now dates the initial firehose boundary; zero means time.Now.
	Now time.Time
}

// DefaultTiers name two of deploy/mongodb's three shard replica sets.
func DefaultTiers() map[string][]string {
	return map[string][]string{"fast": {"shard1"}, "standard": {"shard2"}}
}

// Variants lists the selectable shard keys of every collection, default first.
func Variants() map[string][]string {
	out := map[string][]string{}
	for name, vs := range keyVariants() {
		for _, v := range vs {
			out[name] = append(out[name], v.Variant)
		}
	}
	return out
}

// NewSpec builds the spec for opts.
func NewSpec(opts Options) (Spec, error) {
	db := opts.Database
	if db == "" {
		db = DefaultDatabase
	}
	if strings.ContainsAny(db, "/\\. \"$") {
		return Spec{}, fmt.Errorf("database name %q: must not contain / \\ . space \" $", db)
	}
	tiers := opts.Tiers
	if tiers == nil {
		tiers = DefaultTiers()
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	spec := Spec{Database: db, FirehoseStart: Day(now)}
	zones := make([]string, 0, len(tiers))
	for z := range tiers {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		spec.Tiers = append(spec.Tiers, Tier{Zone: z, Shards: slices.Clone(tiers[z])})
	}
	variants := keyVariants()
	for name := range opts.Variants {
		if _, ok := variants[name]; !ok {
			return Spec{}, fmt.Errorf("collection %q: %w (collections: %s)", name, ErrUnknownVariant, strings.Join(collectionOrder, ", "))
		}
	}
	for _, name := range collectionOrder {
		choices := variants[name]
		want := opts.Variants[name]
		chosen := choices[0]
		if want != "" {
			i := slices.IndexFunc(choices, func(c Collection) bool { return c.Variant == want })
			if i < 0 {
				return Spec{}, fmt.Errorf("collection %q variant %q: %w (choose one of %s)", name, want, ErrUnknownVariant, strings.Join(Variants()[name], ", "))
			}
			chosen = choices[i]
		}
		spec.Collections = append(spec.Collections, chosen)
	}
	return spec, nil
}

// Day truncates t to midnight UTC, the firehose boundary granularity.
func Day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// FillMin completes a shard-key prefix to the full key, MinKey for the rest:
// zone ranges and moveRange bounds must name every shard-key field.
func FillMin(k Key, prefix bson.D) bson.D { return fill(k, prefix, bson.MinKey{}) }

// FillMax completes a shard-key prefix to the full key, MaxKey for the rest.
func FillMax(k Key, prefix bson.D) bson.D { return fill(k, prefix, bson.MaxKey{}) }

func fill(k Key, prefix bson.D, pad any) bson.D {
	out := make(bson.D, 0, len(k))
	for _, f := range k {
		v := any(pad)
		for _, e := range prefix {
			if e.Key == f.Name {
				v = e.Value
			}
		}
		out = append(out, bson.E{Key: f.Name, Value: v})
	}
	return out
}

// ErrNotPrefix means a range bound names fields that are not a shard-key prefix.
var ErrNotPrefix = errors.New("bound is not a shard-key prefix")

// CheckPrefix verifies that bound names a prefix of k's fields, in order.
func CheckPrefix(k Key, bound bson.D) error {
	if len(bound) > len(k) {
		return fmt.Errorf("%w: %d fields for key %s", ErrNotPrefix, len(bound), k)
	}
	for i, e := range bound {
		if e.Key != k[i].Name {
			return fmt.Errorf("%w: field %d is %q, key %s expects %q", ErrNotPrefix, i+1, e.Key, k, k[i].Name)
		}
	}
	return nil
}
