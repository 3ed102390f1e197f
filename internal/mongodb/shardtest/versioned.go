package shardtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Versioned writes. mongos attaches to every write the shard version it routed by (the
// collection's incarnation and the highest chunk version the target shard owns); a shard whose
// own version differs answers StaleConfig without writing, and mongos refreshes its routing
// table and sends the write again. A write sent with no version is taken by whichever shard
// gets it, owner or not: during a migration, an insert that a stale router sends to the donor
// after the commit becomes an orphan there, and is gone once orphans are filtered out. Place
// is fine for loading data with the balancer off; writes racing the balancer go through
// VersionedWrite.

// codeStaleConfig is the server's StaleConfig: the shard version sent is not the shard's.
const codeStaleConfig = 13388

// ShardVersion is ns's version on shard according to c, in the form shards parse: the
// collection's epoch and timestamp, and the highest chunk version the shard owns.
func (c CollectionInfo) ShardVersion(shard string) bson.D {
	var v bson.Timestamp
	for _, ch := range c.Chunks {
		if ch.Shard == shard && ch.Lastmod.After(v) {
			v = ch.Lastmod
		}
	}
	return bson.D{{Key: "e", Value: c.Epoch}, {Key: "t", Value: c.Timestamp}, {Key: "v", Value: v}}
}

// WriteError is a write the shard answered but did not apply (an entry of writeErrors), or,
// with Concern set, one its primary applied without satisfying the write concern: whether that
// one survives a failover is not known.
type WriteError struct {
	Shard   string
	Code    int32
	Message string
	Concern bool
}

func (e *WriteError) Error() string {
	what := "refused"
	if e.Concern {
		what = "applied, write concern failed"
	}
	return fmt.Sprintf("shardtest: write on %s %s: code %d: %s", e.Shard, what, e.Code, e.Message)
}

// Routed says where a versioned write went, and after how many StaleConfig answers.
type Routed struct {
	Shard string
	Stale int
}

// writeReply is the part of an insert, update or delete reply a versioned write reads.
type writeReply struct {
	N int64 `bson:"n"`
}

// VersionedWrite sends cmd, an insert, update or delete on ns's collection of one document
// whose shard key is key (range fields only), to the shard owning key, with the shard version
// attached and majority write concern, as mongos routes a write. A StaleConfig answer (a
// migration moved the range, or the shard has not loaded its metadata yet) refreshes the
// routing table and sends again, until ctx ends. It returns the reply's n (documents inserted,
// or matched by an update) on success, and 0 with every error: the driver returns a reply
// it turned into an error undecoded. A refusal is a *WriteError, an unsatisfied write concern
// a *WriteError with Concern set, and any other error (the network, the deadline) leaves the
// outcome unknown.
func (r *Router) VersionedWrite(ctx context.Context, ns string, key, cmd bson.D) (Routed, int64, error) {
	db, _, _ := strings.Cut(ns, ".")
	var routed Routed
	for {
		info, err := r.routes(ctx, ns, routed.Stale > 0)
		if err != nil {
			return routed, 0, err
		}
		if routed.Shard, err = info.Owner(key); err != nil {
			return routed, 0, err
		}
		cl, ok := r.Shards[routed.Shard]
		if !ok {
			return routed, 0, fmt.Errorf("shardtest: chunk owner %q is not in this cluster", routed.Shard)
		}
		full := append(append(bson.D{}, cmd...), bson.E{Key: "shardVersion", Value: info.ShardVersion(routed.Shard)}, majority())
		var reply writeReply
		err = cl.Database(db).RunCommand(ctx, full).Decode(&reply)
		if isStale(err) { // a command error, or the first write error (a WriteException)
			routed.Stale++
			if err := serverproc.Sleep(ctx, min(time.Duration(routed.Stale)*20*time.Millisecond, 500*time.Millisecond)); err != nil {
				return routed, 0, fmt.Errorf("shardtest: still stale after %d answers: %w", routed.Stale, err)
			}
			continue
		}
		// The driver turns a reply's writeErrors and writeConcernError into a WriteException.
		var wex mongo.WriteException
		switch {
		case errors.As(err, &wex) && len(wex.WriteErrors) > 0:
			we := wex.WriteErrors[0]
			return routed, 0, &WriteError{Shard: routed.Shard, Code: int32(we.Code), Message: we.Message}
		case errors.As(err, &wex) && wex.WriteConcernError != nil:
			wc := wex.WriteConcernError
			return routed, 0, &WriteError{Shard: routed.Shard, Code: int32(wc.Code), Message: wc.Message, Concern: true}
		case err != nil:
			return routed, 0, fmt.Errorf("shardtest: write on %s: %w", routed.Shard, err)
		}
		return routed, reply.N, nil
	}
}

// routes is the cached routing table of ns, read again from the config server when refresh
// is set or nothing is cached.
func (r *Router) routes(ctx context.Context, ns string, refresh bool) (CollectionInfo, error) {
	r.routesMu.Lock()
	info, ok := r.routesCache[ns]
	r.routesMu.Unlock()
	if ok && !refresh {
		return info, nil
	}
	info, err := r.Collection(ctx, ns)
	if err != nil {
		return info, err
	}
	if !info.Sharded {
		return info, fmt.Errorf("shardtest: %s is not sharded: versioned writes need a sharded collection", ns)
	}
	r.routesMu.Lock()
	if r.routesCache == nil {
		r.routesCache = map[string]CollectionInfo{}
	}
	r.routesCache[ns] = info
	r.routesMu.Unlock()
	return info, nil
}

func isStale(err error) bool {
	var ce interface{ HasErrorCode(int) bool }
	return errors.As(err, &ce) && ce.HasErrorCode(codeStaleConfig)
}
