package sharding

import (
	"encoding/binary"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// collectionOrder is the order plan/apply walk the collections in.
var collectionOrder = []string{"orders", "products", "carts", "sessions", "events", "order_history", "claims", "users", "outbox", "counters"}

// The MongoDB backend's outbox_checkpoints (a few documents) stays unsharded. The outbox is
// partitioned (internal/store/mongostore/outbox.go): rows ranged on {p, seq}, one counter document
// per partition hashed on _id, so order transactions do not all meet on one shard.

func hashed(name string) KeyField { return KeyField{Name: name, Kind: Hashed} }
func asc(name string) KeyField    { return KeyField{Name: name, Kind: Ascending} }
func desc(name string) KeyField   { return KeyField{Name: name, Kind: Descending} }

// keyVariants lists every collection's selectable shard-key variants, the default first.
func keyVariants() map[string][]Collection {
	userID := FieldTraits{Monotonic: true, Skewed: true} // ObjectIds grow; wholesale buyers are heavy
	// No secondary index on orders: every read is by {user_id, _id} (the shard key and _id),
	// and a user's history is read from order_history (HIS-1), so an index here would cost a
	// write on every order and serve no query.
	var orderIndexes []Index
	productIndexes := []Index{{
		Name: "category_price_id",
		Key:  Key{asc("category"), asc("price"), asc("_id")},
		Why:  "PRD-2: category search with a price range, pages sorted by (price, _id) without an in-memory sort",
	}, {
		Name: "category_created_id",
		Key:  Key{asc("category"), desc("created_at"), desc("_id")},
		Why:  "PRD-5: a category newest first (a products_by_category listing, by created_at DESC), keyset on (created_at, _id)",
	}}
	// The active cart is found by its _id, derived from its owner, so no
	// index on session_id or user_id: it would cost a write on every cart change.
	cartIndexes := []Index{
		{
			Name: "expires_at_ttl",
			Key:  Key{asc("expires_at")},
			TTL:  true, // expireAfterSeconds 0: a document expires at its own expires_at
			Why:  "guest carts expire with their session; user carts carry no expires_at",
		},
	}
	eventIndexes := []Index{{
		Name: "user_newest",
		Key:  Key{asc("user_id"), asc("type"), desc("_id")},
		Why:  "EVT-1: a user's events newest first, optionally by type",
	}}
	return map[string][]Collection{
		"orders": {
			{
				Name: "orders", Variant: "user_id_hashed",
				Key: Key{hashed("user_id")}, Indexes: orderIndexes,
				Traits: map[string]FieldTraits{"user_id": userID},
				Why:    "SHD-1: even spread; create, history and status are targeted when the filter carries user_id",
			},
			{
				Name: "orders", Variant: "user_id_range",
				Key: Key{asc("user_id")}, Indexes: orderIndexes,
				Traits: map[string]FieldTraits{"user_id": userID},
				Why:    "alternative: readable placement per user range; new users' ObjectIds all land in the top chunk",
			},
			{
				Name: "orders", Variant: "user_id_hashed_order_date",
				Key: Key{hashed("user_id"), asc("order_date")}, Indexes: orderIndexes,
				Traits: map[string]FieldTraits{"user_id": userID, "order_date": {Monotonic: true}},
				Why:    "answers the wholesale-buyer risk: still targeted by user_id, but one heavy user's orders can split by date",
			},
		},
		"products": {
			{
				Name: "products", Variant: "category_id",
				Key: Key{asc("category"), asc("_id")}, Indexes: productIndexes,
				Traits: map[string]FieldTraits{"category": {LowCardinality: true, Skewed: true}, "_id": {Monotonic: true}},
				Why:    "SHD-1: category search targeted; stock updates must carry category (by _id alone they broadcast)",
			},
			{
				Name: "products", Variant: "category_hashed",
				Key: Key{hashed("category")}, Indexes: productIndexes,
				Traits: map[string]FieldTraits{"category": {LowCardinality: true, Skewed: true}},
				Why:    "alternative: one category per chunk, which can never split",
			},
			{
				Name: "products", Variant: "id_hashed",
				Key: Key{hashed("_id")}, Indexes: productIndexes,
				Traits: map[string]FieldTraits{"_id": {Monotonic: true}},
				Why:    "alternative: even spread when stock/page reads outweigh category search (search broadcasts)",
			},
		},
		"carts": {
			{
				Name: "carts", Variant: "id_hashed",
				Key: Key{hashed("_id")}, Indexes: cartIndexes,
				Traits: map[string]FieldTraits{"_id": {Monotonic: true}},
				Why:    "SHD-1: every operation on a known cart is targeted; \"active cart by owner\" is not unless _id derives from the owner",
			},
			{
				Name: "carts", Variant: "user_id_hashed",
				Key: Key{hashed("user_id")}, Indexes: cartIndexes,
				Traits: map[string]FieldTraits{"user_id": {Nullable: true}},
				Why:    "alternative: user carts targeted, but every guest cart (user_id null) shares one hashed value",
			},
		},
		"sessions": {
			{
				Name: "sessions", Variant: "id_hashed",
				Key: Key{hashed("_id")},
				Indexes: []Index{{
					Name: "expires_at_ttl", Key: Key{asc("expires_at")}, TTL: true,
					Why: "SES-1: sessions expire (7 d by default, --session-ttl: the app sets expires_at)",
				}},
				Zone: "standard",
				Why:  "added: random session tokens spread evenly and every lookup is by token; cheap data pinned to the standard tier (SHD-7)",
			},
		},
		"order_history": {
			{
				Name: "order_history", Variant: "user_id_hashed",
				Key:    Key{hashed("user_id")},
				Traits: map[string]FieldTraits{"user_id": userID},
				Why:    "added: the history read model (HIS-1) when placement puts it on MongoDB; read only by user, like orders (its indexes are the repository's)",
			},
		},
		"claims": {
			{
				Name: "claims", Variant: "id_hashed",
				Key: Key{hashed("_id")},
				Why: "added: uniqueness the shard keys cannot give (idempotency keys, one order per cart, emails): the claim's _id is the unique value, enforced cluster-wide by the _id index, looked up by _id",
			},
		},
		"outbox": {
			{
				Name: "outbox", Variant: "partition_seq",
				Key:    Key{asc("p"), asc("seq")},
				Traits: map[string]FieldTraits{"p": {LowCardinality: true}, "seq": {Monotonic: true}},
				Why:    "added: the transactional outbox, 16 partitions each read in seq order; ranged on {p, seq} so each partition's rows stay together and partitions spread over shards",
			},
		},
		"counters": {
			{
				Name: "counters", Variant: "id_hashed",
				Key: Key{hashed("_id")},
				Why: "added: one outbox sequence counter per partition, incremented in every order transaction; hashed so the counters spread over shards",
			},
		},
		"users": {
			{
				Name: "users", Variant: "id_hashed",
				Key:    Key{hashed("_id")},
				Traits: map[string]FieldTraits{"_id": {Monotonic: true}},
				Why:    "added: accounts read by id; hashing spreads ascending ObjectIds",
			},
		},
		"events": {
			{
				Name: "events", Variant: "id_firehose",
				Key: Key{asc("_id")}, Indexes: eventIndexes,
				Traits:   map[string]FieldTraits{"_id": {Monotonic: true}},
				Firehose: &Firehose{Field: "_id", Zone: "fast", Archive: "standard", Boundary: objectIDAt},
				Why:      "added: append-only ObjectId key, every insert goes to the fast tier (firehose, SHD-4) and the daily roll lets older ranges move to the standard tier",
			},
			{
				Name: "events", Variant: "user_id_hashed",
				Key: Key{hashed("user_id"), asc("_id")}, Indexes: eventIndexes,
				Traits: map[string]FieldTraits{"user_id": {Nullable: true}, "_id": {Monotonic: true}},
				Why:    "alternative: per-user reads targeted, writes spread; no firehose (the key does not start ascending)",
			},
		},
	}
}

// objectIDAt is the smallest ObjectId of second t: the counter and machine
// bytes are zero, so every id generated at or after t sorts above it.
func objectIDAt(t time.Time) any {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[0:4], uint32(t.Unix()))
	return id
}
