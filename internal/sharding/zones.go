package sharding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ZoneRangeFor builds a full-key range of collection c from two key prefixes:
// min is padded with MinKey, max with MaxKey, so a prefix
// {category: "books"} for both bounds covers exactly that category. An empty
// min means MinKey..., an empty max MaxKey....
func ZoneRangeFor(c Collection, min, max bson.D, zone string) (Range, error) {
	for _, b := range []bson.D{min, max} {
		if err := CheckPrefix(c.Key, b); err != nil {
			return Range{}, fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	lo, err := HashedBounds(c, "min", FillMin(c.Key, min))
	if err != nil {
		return Range{}, err
	}
	hi, err := HashedBounds(c, "max", FillMax(c.Key, max))
	if err != nil {
		return Range{}, err
	}
	r := Range{Min: lo, Max: hi, Zone: zone}
	if compareKeys(r.Min, r.Max) >= 0 {
		return Range{}, fmt.Errorf("%s: min %s is not below max %s", c.Name, shellValue(r.Min), shellValue(r.Max))
	}
	return r, nil
}

// ErrHashedBound refuses a zone or move bound on a hashed shard-key field
// that is not a NumberLong hash value (or MinKey/MaxKey).
var ErrHashedBound = errors.New("hashed shard-key bounds must be NumberLong hash values")

// HashedBounds returns bound (a full or prefix shard-key document of c) with
// the value of every hashed key field as a NumberLong (int64): a range over a
// hashed field is a range of hash values, and the server compares them as
// NumberLong. Integral int32, int, double, Decimal128 and decimal strings
// ("-154124144", as mongosh prints NumberLong("-154124144")) are converted;
// MinKey and MaxKey are kept; anything else (other strings, fractions, values
// outside int64, ObjectIds, null, ...) is refused, naming the collection, the
// field and the value. which ("min", "max") only labels the error. Fields
// that are not hashed are returned unchanged.
func HashedBounds(c Collection, which string, bound bson.D) (bson.D, error) {
	var out bson.D
	for i, e := range bound {
		if !slices.ContainsFunc(c.Key, func(f KeyField) bool { return f.Name == e.Key && f.Kind == Hashed }) {
			continue
		}
		switch e.Value.(type) {
		case bson.MinKey, bson.MaxKey, int64:
			continue
		}
		h, ok := hashValue(e.Value)
		if !ok {
			return nil, fmt.Errorf("%s: %s bound of hashed field %s: %s is not a hash value: %w (e.g. {%q: {\"$numberLong\": \"-4611686018427387902\"}}) or MinKey/MaxKey",
				c.Name, which, e.Key, boundValue(e.Value), ErrHashedBound, e.Key)
		}
		if out == nil {
			out = slices.Clone(bound)
		}
		out[i].Value = h
	}
	if out == nil {
		return bound, nil
	}
	return out, nil
}

// hashValue converts an integral number (or decimal string) to int64.
func hashValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int:
		return int64(x), true
	case float64:
		// [-2^63, 2^63): float64(math.MaxInt64) rounds up to 2^63, outside.
		if x != math.Trunc(x) || math.IsInf(x, 0) || x < -(1<<63) || x >= 1<<63 {
			return 0, false
		}
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	case bson.Decimal128:
		bi, exp, err := x.BigInt()
		if err != nil {
			return 0, false // NaN, Infinity
		}
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(exp, -exp))), nil)
		if exp >= 0 {
			bi.Mul(bi, p)
		} else if new(big.Int).Rem(bi, p).Sign() != 0 {
			return 0, false
		} else {
			bi.Quo(bi, p)
		}
		return bi.Int64(), bi.IsInt64()
	}
	return 0, false
}

// boundValue renders a bound value for an error message.
func boundValue(v any) string {
	switch x := v.(type) {
	case bson.Decimal128:
		return fmt.Sprintf("NumberDecimal(%q)", x.String())
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bson.MinKey, bson.MaxKey, nil, string, bool, int32, int, int64, bson.ObjectID, bson.DateTime, bson.D, bson.A:
		return shellValue(v)
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// ParseBound reads a shard-key prefix given as Extended JSON, e.g.
// {"category": "books"} or {"_id": {"$oid": "..."}}; "" is the empty prefix.
func ParseBound(s string) (bson.D, error) {
	if s == "" {
		return nil, nil
	}
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		return nil, fmt.Errorf("bound %q: %w", s, err)
	}
	return d, nil
}

// RunLogged runs each command on admin, printing it as mongosh first.
func RunLogged(ctx context.Context, a Admin, out io.Writer, cmds ...bson.D) error {
	for _, c := range cmds {
		fmt.Fprintf(out, "%s\n", Shell("admin", c))
		if _, err := a.RunCommand(ctx, "admin", c); err != nil {
			return err
		}
	}
	return nil
}

// ErrBalancerRunning refuses a manual move while the balancer could undo it.
var ErrBalancerRunning = errors.New("balancer is enabled: stop it first (shardmart mongo balancer stop) or pass --force")

// ErrTooManyChunks refuses a manual move over more chunks than the limit.
var ErrTooManyChunks = errors.New("range covers too many chunks to move by hand")

// ErrMoveChunkBounds means a pre-6.0 server needs exact chunk bounds.
var ErrMoveChunkBounds = errors.New("moveChunk needs exact chunk bounds")

// MoveRangeRequest is one manual move: which range of which collection goes where.
type MoveRangeRequest struct {
	NS         string     // namespace, db.collection
	Collection Collection // its spec entry: the shard key the bounds are checked against
	ToShard    string
	// Min and Max are shard-key prefixes, padded with MinKey/MaxKey; a nil Max lets
	// the server pick the end by chunk size.
	Min, Max bson.D
	Options  MoveRangeOptions
	// Force moves even though the balancer is enabled or mid-round.
	Force bool
}

// MoveRange moves a range manually (SHD-5), refusing while the balancer is
// on or mid-round unless r.Force: the chapter warns the balancer reshuffles
// manual placement. Bounds on a hashed key field are sent as NumberLong.
//
// On 6.0+ with both bounds it reads the collection's chunks (config.chunks by
// the uuid in config.collections) and, since moveRange moves one chunk or
// part of one, sends one moveRange per overlapping chunk not already on
// r.ToShard, with that chunk's bounds clipped to [Min, Max), printing each; a
// range over more than Options.MaxChunks chunks (default DefaultMaxMoveChunks) is
// refused before anything moves: that is a zone's job. Without Max one
// moveRange from Min is sent (the server picks the end by chunk size).
// Servers before 6.0 get one moveChunk (exact chunk bounds).
func MoveRange(ctx context.Context, a Admin, r MoveRangeRequest, out io.Writer) error {
	ns, c, toShard, o := r.NS, r.Collection, r.ToShard, r.Options
	min, fmin, fmax, err := moveBounds(r)
	if err != nil {
		return err
	}
	st, err := GetBalancerStatus(ctx, a)
	if err != nil {
		return err
	}
	if (st.Enabled() || st.InBalancerRound) && !r.Force {
		return fmt.Errorf("%w (%s)", ErrBalancerRunning, st)
	}
	version, err := serverVersion(ctx, a)
	if err != nil {
		return err
	}
	start := time.Now()
	if !VersionAtLeast(version, 6, 0, 0) {
		if fmax == nil {
			// moveChunk's find is an equality match on the whole key, and
			// the manual forbids it for hashed keys: those need bounds.
			if c.Key.Hashed() || len(min) != len(c.Key) {
				return fmt.Errorf("%w: server %s has no moveRange; give the chunk's exact --min and --max (moveChunk bounds)", ErrMoveChunkBounds, version)
			}
			fmin = min
		}
		if err := RunLogged(ctx, a, out, MoveChunkCmd(ns, toShard, fmin, fmax, o)); err != nil {
			return err
		}
		fmt.Fprintf(out, "moved in %s\n", time.Since(start).Round(time.Millisecond))
		return nil
	}
	if fmax == nil {
		if err := RunLogged(ctx, a, out, MoveRangeCmd(ns, toShard, fmin, nil, o)); err != nil {
			return err
		}
		fmt.Fprintf(out, "moved in %s\n", time.Since(start).Round(time.Millisecond))
		return nil
	}
	return moveOverlapping(ctx, a, r, fmin, fmax, start, out)
}

// moveBounds checks r's bounds against the shard key and returns min (hashed where the key
// is) and both bounds padded to the whole key; fmax is nil when r has no max.
func moveBounds(r MoveRangeRequest) (min, fmin, fmax bson.D, err error) {
	c, max := r.Collection, r.Max
	if err := CheckPrefix(c.Key, r.Min); err != nil {
		return nil, nil, nil, fmt.Errorf("min: %w", err)
	}
	if max != nil {
		if err := CheckPrefix(c.Key, max); err != nil {
			return nil, nil, nil, fmt.Errorf("max: %w", err)
		}
	}
	min, err = HashedBounds(c, "min", r.Min)
	if err != nil {
		return nil, nil, nil, err
	}
	fmin = FillMin(c.Key, min)
	if max != nil {
		// same padding as zone ranges: {category: "books"} covers that category
		if fmax, err = HashedBounds(c, "max", FillMax(c.Key, max)); err != nil {
			return nil, nil, nil, err
		}
		if compareKeys(fmin, fmax) >= 0 {
			return nil, nil, nil, fmt.Errorf("%s: min %s is not below max %s", r.NS, shellValue(fmin), shellValue(fmax))
		}
	}
	return min, fmin, fmax, nil
}

// serverVersion is the server's version as buildInfo reports it.
func serverVersion(ctx context.Context, a Admin) (string, error) {
	raw, err := a.RunCommand(ctx, "admin", BuildInfoCmd())
	if err != nil {
		return "", err
	}
	var bi struct {
		Version string `bson:"version"`
	}
	if err := bson.Unmarshal(raw, &bi); err != nil {
		return "", fmt.Errorf("decode buildInfo: %w", err)
	}
	return bi.Version, nil
}

// moveOverlapping moves fmin..fmax to r.ToShard one moveRange per chunk it overlaps, clipped
// to the range, skipping chunks already there; start is when the whole move began.
func moveOverlapping(ctx context.Context, a Admin, r MoveRangeRequest, fmin, fmax bson.D, start time.Time, out io.Writer) error {
	ns, toShard, o := r.NS, r.ToShard, r.Options
	chunks, err := overlappingChunks(ctx, a, ns, fmin, fmax)
	if err != nil {
		return err
	}
	limit := o.MaxChunks
	if limit <= 0 {
		limit = DefaultMaxMoveChunks
	}
	if len(chunks) > limit {
		return fmt.Errorf("%w: %s..%s of %s covers %d chunks (limit %d): assign the range to a zone instead (shardmart mongo zones add-shard / add-range) and let the balancer move it, or raise --max-chunks",
			ErrTooManyChunks, shellValue(fmin), shellValue(fmax), ns, len(chunks), limit)
	}
	var todo []Chunk
	for _, ch := range chunks {
		if ch.Shard == toShard {
			fmt.Fprintf(out, "// chunk %s..%s already on %s: skipped\n", shellValue(ch.Min), shellValue(ch.Max), toShard)
			continue
		}
		todo = append(todo, ch)
	}
	for i, ch := range todo {
		lo, hi := ch.Min, ch.Max
		if compareKeys(lo, fmin) < 0 {
			lo = fmin // the range starts inside this chunk
		}
		if compareKeys(hi, fmax) > 0 {
			hi = fmax // the range ends inside this chunk
		}
		fmt.Fprintf(out, "// move %d/%d: %s..%s from %s to %s\n", i+1, len(todo), shellValue(lo), shellValue(hi), ch.Shard, toShard)
		t := time.Now()
		if err := RunLogged(ctx, a, out, MoveRangeCmd(ns, toShard, lo, hi, o)); err != nil {
			return fmt.Errorf("move %d of %d (%s..%s from %s): %w; %d of %d moved before it",
				i+1, len(todo), shellValue(lo), shellValue(hi), ch.Shard, err, i, len(todo))
		}
		fmt.Fprintf(out, "moved in %s\n", time.Since(t).Round(time.Millisecond))
	}
	if len(todo) == 0 {
		fmt.Fprintf(out, "%s..%s of %s is already on %s (%d chunk(s)): nothing to move\n", shellValue(fmin), shellValue(fmax), ns, toShard, len(chunks))
		return nil
	}
	fmt.Fprintf(out, "moved %d range(s) to %s in %s (%d of %d overlapping chunk(s) already there)\n",
		len(todo), toShard, time.Since(start).Round(time.Millisecond), len(chunks)-len(todo), len(chunks))
	return nil
}

// Chunk is one document of config.chunks (6.0: keyed by the collection uuid).
type Chunk struct {
	Min   bson.D `bson:"min"`
	Max   bson.D `bson:"max"`
	Shard string `bson:"shard"`
}

// ErrNotSharded means config.collections has no entry for a namespace.
var ErrNotSharded = errors.New("collection is not sharded")

// overlappingChunks reads the chunks of ns that intersect [min, max), in key
// order. The whole chunk list of the collection is read and filtered here.
func overlappingChunks(ctx context.Context, a Admin, ns string, min, max bson.D) ([]Chunk, error) {
	docs, err := a.Find(ctx, "config", "collections", bson.D{{Key: "_id", Value: ns}})
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: %w (no config.collections entry)", ns, ErrNotSharded)
	}
	uuid, err := docs[0].LookupErr("uuid")
	if err != nil {
		return nil, fmt.Errorf("%s: config.collections entry has no uuid (server before 5.0?): %w", ns, err)
	}
	raws, err := a.Find(ctx, "config", "chunks", bson.D{{Key: "uuid", Value: uuid}})
	if err != nil {
		return nil, err
	}
	all, err := decodeAll[Chunk](raws)
	if err != nil {
		return nil, err
	}
	var out []Chunk
	for _, ch := range all {
		if compareKeys(ch.Min, max) < 0 && compareKeys(min, ch.Max) < 0 {
			out = append(out, ch)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no chunk in config.chunks overlaps %s..%s", ns, shellValue(min), shellValue(max))
	}
	slices.SortFunc(out, func(x, y Chunk) int { return compareKeys(x.Min, y.Min) })
	return out, nil
}

// Roll runs a firehose roll for collection c of spec at time at.
func Roll(ctx context.Context, a Admin, spec Spec, c Collection, at time.Time, dryRun bool, out io.Writer) (int, error) {
	ns := spec.Namespace(c.Name)
	cur, err := zoneRanges(ctx, a, ns)
	if err != nil {
		return 0, err
	}
	steps, err := PlanRoll(ns, c, cur, at)
	if err != nil {
		return 0, err
	}
	if len(steps) == 0 {
		fmt.Fprintf(out, "%s: firehose boundary already at %s or later; nothing to do\n", ns, Day(at).Format(time.DateOnly))
		return 0, nil
	}
	for _, s := range steps {
		fmt.Fprintf(out, "// %s\n", s.Comment)
		if dryRun {
			fmt.Fprintf(out, "%s\n", Shell("admin", s.Cmd))
			continue
		}
		if err := RunLogged(ctx, a, out, s.Cmd); err != nil {
			return 0, fmt.Errorf("firehose roll %s: %w", ns, err)
		}
	}
	return len(steps), nil
}

// ListZoneRanges reads the config.tags ranges of ns.
func ListZoneRanges(ctx context.Context, a Admin, ns string) ([]ZoneRange, error) {
	return zoneRanges(ctx, a, ns)
}

// ShellValue renders a BSON value as mongosh source.
func ShellValue(v any) string { return shellValue(v) }
