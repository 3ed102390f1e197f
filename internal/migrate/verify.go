package migrate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
)

// RangeSum is one side of one range: its row count and the sum (mod 2^64) of its rows'
// canonical hashes, which does not depend on the order rows are read in.
type RangeSum struct {
	Rows int
	Sum  uint64
}

// Diff is a key whose row differs between the two sides.
type Diff struct {
	Range  int
	Key    string
	Reason string // "missing in target", "only in target", "differs"
}

// Report is a verify's outcome.
type Report struct {
	Family                 Family
	SourceRows, TargetRows int
	Source, Target         []RangeSum // by range id
	Diffs                  []Diff     // sorted by key
}

// Scanner reads every row of a family back from the new store, in the shape Reader.Read
// returns (Target, MongoTarget).
type Scanner interface {
	Scan(ctx context.Context, f Family, fn func(Row) error) error
}

// Verify compares family f on both sides: counts and checksums per range, then, in each
// range whose sums differ, the keys that differ. Rows that expire within margin of now
// are left out on both sides (Cassandra drops them by TTL during the scan). Any difference
// returns the report with an error wrapping ErrDifferences, for a non-zero exit status.
// It holds one hash per row in memory (16 bytes a key plus the key).
func Verify(ctx context.Context, src Reader, dst Scanner, f Family, opts Options) (Report, error) {
	opts.defaults()
	const margin = time.Minute
	rep := Report{Family: f}
	if _, err := codecOf(f); err != nil {
		return rep, err
	}
	ranges, err := src.Split(ctx, f, opts.Split)
	if err != nil {
		return rep, err
	}
	now := opts.Now()
	rep.Source, rep.Target = make([]RangeSum, len(ranges)), make([]RangeSum, len(ranges))
	srcH := make([]map[string]uint64, len(ranges))
	dstH := make([]map[string]uint64, len(ranges))
	for _, r := range ranges {
		rows, err := src.Read(ctx, f, r)
		if err != nil {
			return rep, err
		}
		srcH[r.ID] = map[string]uint64{}
		dstH[r.ID] = map[string]uint64{}
		for _, row := range rows {
			if row.expired(now, margin) {
				continue
			}
			h := rowHash(row)
			srcH[r.ID][row.Key] = h
			rep.Source[r.ID].Rows++
			rep.Source[r.ID].Sum += h
			rep.SourceRows++
		}
	}
	err = dst.Scan(ctx, f, func(row Row) error {
		if row.expired(now, margin) {
			return nil
		}
		id := rangeOf(ranges, row.Key)
		h := rowHash(row)
		dstH[id][row.Key] = h
		rep.Target[id].Rows++
		rep.Target[id].Sum += h
		rep.TargetRows++
		return nil
	})
	if err != nil {
		return rep, err
	}
	for _, r := range ranges {
		if rep.Source[r.ID] == rep.Target[r.ID] {
			continue
		}
		for k, h := range srcH[r.ID] {
			if th, ok := dstH[r.ID][k]; !ok {
				rep.Diffs = append(rep.Diffs, Diff{r.ID, k, "missing in target"})
			} else if th != h {
				rep.Diffs = append(rep.Diffs, Diff{r.ID, k, "differs"})
			}
		}
		for k := range dstH[r.ID] {
			if _, ok := srcH[r.ID][k]; !ok {
				rep.Diffs = append(rep.Diffs, Diff{r.ID, k, "only in target"})
			}
		}
	}
	sort.Slice(rep.Diffs, func(i, j int) bool { return rep.Diffs[i].Key < rep.Diffs[j].Key })
	if len(rep.Diffs) > 0 {
		return rep, fmt.Errorf("%w: %s: %d keys (source %d rows, target %d)", ErrDifferences, f, len(rep.Diffs), rep.SourceRows, rep.TargetRows)
	}
	return rep, nil
}

// Sides are a differing key's canonical rows: Source and Target, "" where the side has none.
type Sides struct{ Source, Target string }

// Explain reads keys of f again on both sides and returns their canonical rows, for an
// operator to see what differs (one read per key on the old store, one scan of Cassandra).
func Explain(ctx context.Context, src Reader, dst Scanner, f Family, keys []string) (map[string]Sides, error) {
	out := make(map[string]Sides, len(keys))
	for _, k := range keys {
		rows, err := src.Read(ctx, f, keyOnly(k))
		if err != nil {
			return nil, err
		}
		var s Sides
		if len(rows) > 0 {
			s.Source = Canonical(rows[0])
		}
		out[k] = s
	}
	err := dst.Scan(ctx, f, func(r Row) error {
		if s, ok := out[r.Key]; ok {
			s.Target = Canonical(r)
			out[r.Key] = s
		}
		return nil
	})
	return out, err
}

// Repair copies each differing key again from the old store with the dual write's rule (read
// now, replace at now): the old store is the source of truth until cutover. A cart is copied
// with its owner's partition, the owner found on whichever side holds the cart.
func Repair(ctx context.Context, src MirrorSource, dst *Target, f Family, diffs []Diff) error {
	m := &Mirror{Src: src, Dst: dst}
	for _, d := range diffs {
		var err error
		if f == Carts {
			err = m.repairCart(ctx, d.Key)
		} else {
			err = m.Keys(ctx, f, d.Key)
		}
		if err != nil {
			return fmt.Errorf("repair %s %s: %w", f, d.Key, err)
		}
	}
	return nil
}

// Repair is Repair into t.
func (t *Target) Repair(ctx context.Context, src MirrorSource, f Family, diffs []Diff) error {
	return Repair(ctx, src, t, f, diffs)
}

func (m *Mirror) repairCart(ctx context.Context, id string) error {
	rows, err := m.Src.Read(ctx, Carts, keyOnly(id))
	if err != nil {
		return err
	}
	var owner cart.Owner
	if len(rows) > 0 {
		owner = rows[0].Cart.Owner
	} else if owner, err = m.Dst.CartOwner(ctx, id); err != nil {
		return err
	}
	return m.Carts(ctx, owner, id)
}
