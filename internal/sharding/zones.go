package sharding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ZoneRangeFor builds a full-key range of collection c from two key prefixes:
// min is padded with MinKey, max with MaxKey (DESIGN note 6), so a prefix
// {category: "books"} for both bounds covers exactly that category. An empty
// min means MinKey..., an empty max MaxKey....
func ZoneRangeFor(c Collection, min, max bson.D, zone string) (Range, error) {
	for _, b := range []bson.D{min, max} {
		if err := CheckPrefix(c.Key, b); err != nil {
			return Range{}, fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	r := Range{Min: FillMin(c.Key, min), Max: FillMax(c.Key, max), Zone: zone}
	if compareKeys(r.Min, r.Max) >= 0 {
		return Range{}, fmt.Errorf("%s: min %s is not below max %s", c.Name, shellValue(r.Min), shellValue(r.Max))
	}
	return r, nil
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

// ErrMoveChunkBounds means a pre-6.0 server needs exact chunk bounds.
var ErrMoveChunkBounds = errors.New("moveChunk needs exact chunk bounds")

// MoveRange moves a range manually (SHD-5), refusing while the balancer is
// on or mid-round unless force: the chapter warns the balancer reshuffles
// manual placement. Servers before 6.0 get moveChunk (exact chunk bounds).
func MoveRange(ctx context.Context, a Admin, ns string, c Collection, toShard string, min, max bson.D, o MoveRangeOptions, force bool, out io.Writer) error {
	if err := CheckPrefix(c.Key, min); err != nil {
		return fmt.Errorf("min: %w", err)
	}
	if max != nil {
		if err := CheckPrefix(c.Key, max); err != nil {
			return fmt.Errorf("max: %w", err)
		}
	}
	st, err := GetBalancerStatus(ctx, a)
	if err != nil {
		return err
	}
	if (st.Enabled() || st.InBalancerRound) && !force {
		return fmt.Errorf("%w (%s)", ErrBalancerRunning, st)
	}
	raw, err := a.RunCommand(ctx, "admin", BuildInfoCmd())
	if err != nil {
		return err
	}
	var bi struct {
		Version string `bson:"version"`
	}
	if err := bson.Unmarshal(raw, &bi); err != nil {
		return fmt.Errorf("decode buildInfo: %w", err)
	}
	fmin := FillMin(c.Key, min)
	var fmax bson.D
	if max != nil {
		fmax = FillMax(c.Key, max) // same padding as zone ranges: {category: "books"} covers that category
	}
	cmd := MoveRangeCmd(ns, toShard, fmin, fmax, o)
	if !VersionAtLeast(bi.Version, 6, 0, 0) {
		if max == nil {
			// moveChunk's find is an equality match on the whole key, and
			// the manual forbids it for hashed keys: those need bounds.
			if c.Key.Hashed() || len(min) != len(c.Key) {
				return fmt.Errorf("%w: server %s has no moveRange; give the chunk's exact --min and --max (moveChunk bounds)", ErrMoveChunkBounds, bi.Version)
			}
			fmin = min
		}
		cmd = MoveChunkCmd(ns, toShard, fmin, fmax, o)
	}
	start := time.Now()
	if err := RunLogged(ctx, a, out, cmd); err != nil {
		return err
	}
	fmt.Fprintf(out, "moved in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
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
