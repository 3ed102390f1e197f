package sharding

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The builders below return the exact command documents shardmart sends.
// Field names and forms follow the MongoDB manual's command pages
// (enableSharding, createIndexes, shardCollection, addShardToZone,
// removeShardFromZone, updateZoneKeyRange, balancerStatus/Start/Stop,
// moveRange, moveChunk, buildInfo); all but createIndexes run on "admin".

// EnableShardingCmd creates the database explicitly. Since 6.0 it is no longer
// required before shardCollection, but it is harmless there and needed before.
func EnableShardingCmd(db string) bson.D {
	return bson.D{{Key: "enableSharding", Value: db}}
}

// CreateIndexesCmd builds indexes on coll; it runs on the collection's database.
func CreateIndexesCmd(coll string, ixs ...Index) bson.D {
	docs := make(bson.A, 0, len(ixs))
	for _, ix := range ixs {
		docs = append(docs, ix.Doc())
	}
	return bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: docs}}
}

// ShardCollectionCmd shards ns on key.
func ShardCollectionCmd(ns string, key Key) bson.D {
	return bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key.Doc()}}
}

// AddShardToZoneCmd associates shard with zone (creating the zone).
func AddShardToZoneCmd(shard, zone string) bson.D {
	return bson.D{{Key: "addShardToZone", Value: shard}, {Key: "zone", Value: zone}}
}

// RemoveShardFromZoneCmd dissociates shard from zone.
func RemoveShardFromZoneCmd(shard, zone string) bson.D {
	return bson.D{{Key: "removeShardFromZone", Value: shard}, {Key: "zone", Value: zone}}
}

// UpdateZoneKeyRangeCmd assigns [min, max) of ns to zone.
func UpdateZoneKeyRangeCmd(ns string, r Range) bson.D {
	return bson.D{
		{Key: "updateZoneKeyRange", Value: ns},
		{Key: "min", Value: r.Min},
		{Key: "max", Value: r.Max},
		{Key: "zone", Value: r.Zone},
	}
}

// RemoveZoneKeyRangeCmd removes the range [min, max) of ns from its zone: a
// null zone, and min/max must match the existing range exactly.
func RemoveZoneKeyRangeCmd(ns string, min, max bson.D) bson.D {
	return bson.D{
		{Key: "updateZoneKeyRange", Value: ns},
		{Key: "min", Value: min},
		{Key: "max", Value: max},
		{Key: "zone", Value: nil},
	}
}

// BalancerStatusCmd reads mode, inBalancerRound and numBalancerRounds.
func BalancerStatusCmd() bson.D { return bson.D{{Key: "balancerStatus", Value: int32(1)}} }

// BalancerStartCmd enables the balancer.
func BalancerStartCmd() bson.D { return bson.D{{Key: "balancerStart", Value: int32(1)}} }

// BalancerStopCmd disables the balancer; the server waits for a running round
// up to maxTime (the server default is 60 s when maxTime is 0). This is the
// mongosh form; from Go, send BalancerStopCmd(0) under a context deadline.
func BalancerStopCmd(maxTime time.Duration) bson.D {
	d := bson.D{{Key: "balancerStop", Value: int32(1)}}
	if maxTime > 0 {
		d = append(d, bson.E{Key: "maxTimeMS", Value: maxTime.Milliseconds()})
	}
	return d
}

// BuildInfoCmd reads the server version (auto-split is a no-op since 6.0.3).
func BuildInfoCmd() bson.D { return bson.D{{Key: "buildInfo", Value: int32(1)}} }

// MoveRangeOptions are moveRange's optional fields, plus MaxChunks, which
// only MoveRange reads (the builders ignore it).
type MoveRangeOptions struct {
	ForceJumbo        bool
	WaitForDelete     bool
	SecondaryThrottle bool
	// MaxChunks caps how many chunks one MoveRange may move one by one
	// (0: DefaultMaxMoveChunks); a wider range belongs in a zone.
	MaxChunks int
}

// DefaultMaxMoveChunks is MoveRange's chunk limit when MaxChunks is 0.
const DefaultMaxMoveChunks = 64

// MoveRangeCmd (6.0+) moves [min, max) of ns to toShard; a nil max lets the
// server pick the upper bound from the chunk size.
func MoveRangeCmd(ns, toShard string, min, max bson.D, o MoveRangeOptions) bson.D {
	d := bson.D{{Key: "moveRange", Value: ns}, {Key: "toShard", Value: toShard}, {Key: "min", Value: min}}
	if max != nil {
		d = append(d, bson.E{Key: "max", Value: max})
	}
	if o.ForceJumbo {
		d = append(d, bson.E{Key: "forceJumbo", Value: true})
	}
	if o.WaitForDelete {
		d = append(d, bson.E{Key: "waitForDelete", Value: true})
	}
	if o.SecondaryThrottle {
		d = append(d, bson.E{Key: "secondaryThrottle", Value: true})
	}
	return d
}

// MoveChunkCmd is the pre-6.0 fallback: bounds must be an existing chunk's
// exact bounds; without max the chunk containing min is moved (find).
func MoveChunkCmd(ns, toShard string, min, max bson.D, o MoveRangeOptions) bson.D {
	d := bson.D{{Key: "moveChunk", Value: ns}}
	if max != nil {
		d = append(d, bson.E{Key: "bounds", Value: bson.A{min, max}})
	} else {
		d = append(d, bson.E{Key: "find", Value: min})
	}
	d = append(d, bson.E{Key: "to", Value: toShard})
	if o.ForceJumbo {
		d = append(d, bson.E{Key: "forceJumbo", Value: true})
	}
	if o.WaitForDelete {
		d = append(d, bson.E{Key: "_waitForDelete", Value: true})
	}
	if o.SecondaryThrottle {
		d = append(d, bson.E{Key: "_secondaryThrottle", Value: true})
	}
	return d
}
