package sharding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var (
	// ErrRules means the spec fails an error-level SHD-6 rule.
	ErrRules = errors.New("sharding spec breaks shard-key rules")
	// ErrShardKeyMismatch means a collection is already sharded on another key;
	// apply never reshards (use reshardCollection deliberately).
	ErrShardKeyMismatch = errors.New("collection already sharded on a different key")
	// ErrUnknownShard means a tier names a shard the cluster does not have.
	ErrUnknownShard = errors.New("shard not in cluster")
	// ErrDrift means existing zone ranges conflict with the spec; apply left them alone.
	ErrDrift = errors.New("zone ranges differ from the spec")
)

// ApplyResult counts what apply did.
type ApplyResult struct {
	Ran, Skipped int
	Drift        []string
}

// Apply brings the cluster to spec: for every plan step it reads the state
// first (config.databases, config.shards, config.tags, listIndexes,
// config.collections) and runs the command only when it is missing, so
// running it twice changes nothing. dryRun reports without running.
func Apply(ctx context.Context, a Admin, spec Spec, out io.Writer, dryRun bool) (ApplyResult, error) {
	var res ApplyResult
	if errs := Errors(Check(spec)); len(errs) > 0 {
		return res, fmt.Errorf("%w: %v", ErrRules, errs)
	}
	for _, s := range Plan(spec) {
		st, why, err := satisfied(ctx, a, s)
		if err != nil {
			return res, err
		}
		if st == conflict {
			res.Drift = append(res.Drift, why)
			fmt.Fprintf(out, "drift  %s\n       %s\n", s.Shell(), why)
			continue
		}
		if st == present {
			res.Skipped++
			fmt.Fprintf(out, "skip   %s  (%s)\n", s.Shell(), why)
			continue
		}
		if dryRun {
			res.Ran++
			fmt.Fprintf(out, "would  %s\n", s.Shell())
			continue
		}
		if _, err := a.RunCommand(ctx, s.DB, s.Cmd); err != nil {
			return res, fmt.Errorf("apply %s: %w", s.Comment, err)
		}
		res.Ran++
		fmt.Fprintf(out, "ran    %s\n", s.Shell())
	}
	if len(res.Drift) > 0 {
		return res, fmt.Errorf("%w: %d range(s); review with `shardmart mongo zones` (apply never removes ranges)", ErrDrift, len(res.Drift))
	}
	return res, nil
}

// state is what the cluster holds for one plan step.
type state int

const (
	missing  state = iota
	present        // already there: skip
	conflict       // something else is there: report, never overwrite
)

func have(ok bool) state {
	if ok {
		return present
	}
	return missing
}

// satisfied reports whether the cluster already has what step s creates.
func satisfied(ctx context.Context, a Admin, s Step) (st state, why string, err error) {
	switch s.Action {
	case ActEnableSharding:
		docs, err := a.Find(ctx, "config", "databases", bson.D{{Key: "_id", Value: s.Cmd[0].Value}})
		if err != nil {
			return missing, "", err
		}
		return have(len(docs) > 0), "database exists in config.databases", nil

	case ActAddShardToZone:
		docs, err := a.Find(ctx, "config", "shards", bson.D{{Key: "_id", Value: s.Shard}})
		if err != nil {
			return missing, "", err
		}
		if len(docs) == 0 {
			return missing, "", fmt.Errorf("%w: %q (tier %q); list shards with db.adminCommand({ listShards: 1 }) and pass --tier %s=<shard>", ErrUnknownShard, s.Shard, s.Zone, s.Zone)
		}
		var sh struct {
			Tags []string `bson:"tags"`
		}
		if err := bson.Unmarshal(docs[0], &sh); err != nil {
			return missing, "", fmt.Errorf("decode config.shards: %w", err)
		}
		return have(slices.Contains(sh.Tags, s.Zone)), "shard already in zone", nil

	case ActZoneRange:
		ranges, err := zoneRanges(ctx, a, s.NS)
		if err != nil {
			return missing, "", err
		}
		for _, r := range ranges {
			if r.Tag == s.Range.Zone && docsEqual(r.Min, s.Range.Min) && docsEqual(r.Max, s.Range.Max) {
				return present, "range exists in config.tags", nil
			}
		}
		if s.Collection.Firehose != nil && slices.ContainsFunc(ranges, func(r ZoneRange) bool { return r.Tag == s.Collection.Firehose.Zone }) {
			// The daily roll owns the boundary; apply only creates the first one.
			return present, "firehose ranges exist; moved by `shardmart mongo firehose roll`", nil
		}
		for _, r := range ranges {
			if overlaps(s.Collection.Key, r.Range(), s.Range) {
				return conflict, fmt.Sprintf("existing range %s..%s on zone %q overlaps the spec's", shellValue(r.Min), shellValue(r.Max), r.Tag), nil
			}
		}
		return missing, "", nil

	case ActCreateIndex:
		reply, err := a.RunCommand(ctx, s.DB, bson.D{{Key: "listIndexes", Value: s.Collection.Name}})
		if err != nil {
			if isNamespaceNotFound(err) {
				return missing, "", nil
			}
			return missing, "", err
		}
		var li struct {
			Cursor struct {
				FirstBatch []struct {
					Key bson.D `bson:"key"`
				} `bson:"firstBatch"`
			} `bson:"cursor"`
		}
		if err := bson.Unmarshal(reply, &li); err != nil {
			return missing, "", fmt.Errorf("decode listIndexes: %w", err)
		}
		want := s.Index.Key.Doc()
		for _, ix := range li.Cursor.FirstBatch {
			if docsEqual(ix.Key, want) {
				return present, "index with this key exists", nil
			}
		}
		return missing, "", nil

	case ActShardCollection:
		docs, err := a.Find(ctx, "config", "collections", bson.D{{Key: "_id", Value: s.NS}})
		if err != nil {
			return missing, "", err
		}
		if len(docs) == 0 {
			return missing, "", nil
		}
		var cc struct {
			Key          bson.D `bson:"key"`
			Unsplittable bool   `bson:"unsplittable"` // 8.0 tracks unsharded collections too
		}
		if err := bson.Unmarshal(docs[0], &cc); err != nil {
			return missing, "", fmt.Errorf("decode config.collections: %w", err)
		}
		if cc.Unsplittable {
			return missing, "", nil
		}
		if !docsEqual(cc.Key, s.Collection.Key.Doc()) {
			return missing, "", fmt.Errorf("%s: %w: cluster has %s, spec wants %s", s.NS, ErrShardKeyMismatch, shellValue(cc.Key), s.Collection.Key)
		}
		return present, "already sharded on this key", nil
	}
	return missing, "", fmt.Errorf("unknown plan action %q", s.Action)
}

// zoneRanges reads the config.tags ranges of ns.
func zoneRanges(ctx context.Context, a Admin, ns string) ([]ZoneRange, error) {
	raws, err := a.Find(ctx, "config", "tags", bson.D{{Key: "ns", Value: ns}})
	if err != nil {
		return nil, err
	}
	return decodeAll[ZoneRange](raws)
}
