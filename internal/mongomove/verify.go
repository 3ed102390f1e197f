package mongomove

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// Collection is one collection's comparison: the rows on each side and the keys whose rows
// differ or exist on one side only (at most maxKeys of them listed).
type Collection struct {
	Name           string
	Source, Target int64
	SourceSum      string // SHA-256 over the rows' canonical forms, in key order
	TargetSum      string
	Differing      int
	Keys           []string
}

const maxKeys = 10

func (c Collection) verdict() string {
	if c.Differing == 0 && c.SourceSum == c.TargetSum {
		return "equal " + c.SourceSum[:12]
	}
	return fmt.Sprintf("DIFFERENT (%d keys: %s)", c.Differing, strings.Join(c.Keys, ", "))
}

// Report is a verify's result.
type Report struct {
	Collections []Collection
}

// Equal reports whether every collection matched.
func (r Report) Equal() bool { return r.Differences() == 0 }

// Differences counts the differing keys over every collection.
func (r Report) Differences() int {
	n := 0
	for _, c := range r.Collections {
		n += c.Differing
	}
	return n
}

// Summary names the differing collections.
func (r Report) Summary() string {
	var parts []string
	for _, c := range r.Collections {
		if c.Differing > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d (%s)", c.Name, c.Differing, strings.Join(c.Keys, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

// digest maps a row's key to the hash of its canonical form.
type digest map[string]string

func (d digest) add(key string, row any) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	d[key] = hex.EncodeToString(sum[:16])
	return nil
}

func (d digest) sum() string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(d)) {
		fmt.Fprintf(h, "%s=%s\n", k, d[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func compareDigests(name string, src, dst digest) Collection {
	c := Collection{Name: name, Source: int64(len(src)), Target: int64(len(dst)), SourceSum: src.sum(), TargetSum: dst.sum()}
	keys := slices.Sorted(maps.Keys(src))
	for k := range dst {
		if _, ok := src[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if src[k] != dst[k] {
			c.Differing++
			if len(c.Keys) < maxKeys {
				c.Keys = append(c.Keys, k)
			}
		}
	}
	return c
}

// ms is how MongoDB keeps a time: UTC, whole milliseconds (BSON dates).
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func canonProduct(p catalog.Product) catalog.Product {
	p.CreatedAt, p.UpdatedAt = ms(p.CreatedAt), ms(p.UpdatedAt)
	if len(p.Attributes) == 0 {
		p.Attributes = nil
	}
	if p.Stock == nil {
		p.Stock = map[string]int64{}
	}
	return p
}

func canonOrder(o order.Order) order.Order {
	o.CreatedAt, o.UpdatedAt = ms(o.CreatedAt), ms(o.UpdatedAt)
	return o
}

func canonUser(u account.User) account.User {
	u.CreatedAt = ms(u.CreatedAt)
	return u
}

func canonClaim(c mongostore.ClaimRow) mongostore.ClaimRow {
	c.At = ms(c.At)
	return c
}

// Compare reads the family on both sides, the embedded one at one snapshot, and compares
// every collection row by row: products (stock included), users (password hashes included),
// orders (items and status), the claims (idempotency keys, carts, order ids, product ids,
// fenced carts), the outbox messages not yet applied everywhere, the consumers' checkpoints
// and the partitions' counters. Times compare at MongoDB's millisecond precision. MongoDB's
// collections are read in parallel with each other and with the embedded store: the compare
// runs inside the freeze.
func Compare(ctx context.Context, src *sqlitestore.DB, dst *mongostore.Store) (Report, error) {
	var rep Report
	snap, err := src.ReadSnapshot(ctx)
	if err != nil {
		return rep, err
	}
	defer snap.Close()

	// MongoDB's side, a goroutine per collection.
	names := []string{"products", "users", "orders", "claims", "outbox"}
	target := map[string]digest{}
	for _, n := range names {
		target[n] = digest{}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		d := target["products"]
		return dst.EachProduct(gctx, func(p catalog.Product) error { return d.add(p.ID, canonProduct(p)) })
	})
	g.Go(func() error {
		d := target["users"]
		return dst.EachUser(gctx, func(u account.User) error { return d.add(u.Email, canonUser(u)) })
	})
	g.Go(func() error {
		d := target["orders"]
		return dst.EachOrder(gctx, func(o order.Order) error { return d.add(o.ID, canonOrder(o)) })
	})
	g.Go(func() error {
		d := target["claims"]
		return dst.EachClaim(gctx, func(c mongostore.ClaimRow) error { return d.add(c.ID, canonClaim(c)) })
	})
	g.Go(func() error {
		d := target["outbox"]
		return dst.EachOutbox(gctx, func(m mongostore.PlacedMessage) error {
			m.At = ms(m.At)
			return d.add(outboxKey(m), m)
		})
	})

	// The embedded side, at one snapshot, while those run.
	source, err := sourceDigests(ctx, snap, dst)
	if err != nil {
		return rep, errors.Join(err, g.Wait())
	}
	if err := g.Wait(); err != nil {
		return rep, err
	}
	for _, n := range names {
		rep.Collections = append(rep.Collections, compareDigests(n, source.rows[n], target[n]))
	}

	ks, kd := digest{}, digest{}
	for c, seqs := range source.checkpoints {
		got, err := dst.OutboxCheckpoints(ctx, c)
		if err != nil {
			return rep, err
		}
		for p := range seqs {
			if err := addSeq(ks, kd, fmt.Sprintf("%s/%d", c, p), seqs, got, p); err != nil {
				return rep, err
			}
		}
	}
	rep.Collections = append(rep.Collections, compareDigests("outbox_checkpoints", ks, kd))
	got, err := dst.OutboxCounters(ctx)
	if err != nil {
		return rep, err
	}
	ns, nd := digest{}, digest{}
	for p := range source.counters {
		if err := addSeq(ns, nd, fmt.Sprint(p), source.counters, got, p); err != nil {
			return rep, err
		}
	}
	rep.Collections = append(rep.Collections, compareDigests("outbox_counters", ns, nd))
	return rep, nil
}

// addSeq adds partition p's expected and found seq under key.
func addSeq(want, have digest, key string, expected, found []int64, p int) error {
	if err := want.add(key, expected[p]); err != nil {
		return err
	}
	if p < len(found) {
		return have.add(key, found[p])
	}
	return nil
}

func outboxKey(m mongostore.PlacedMessage) string { return fmt.Sprintf("%d/%d", m.Partition, m.Seq) }

// source is what the embedded store's snapshot says MongoDB must hold.
type source struct {
	rows        map[string]digest
	checkpoints map[string][]int64
	counters    []int64
}

func sourceDigests(ctx context.Context, snap *sqlitestore.ReadSnapshot, dst *mongostore.Store) (source, error) {
	src := source{rows: map[string]digest{"products": {}, "users": {}, "orders": {}, "claims": {}, "outbox": {}}}
	claims := src.rows["claims"]
	if err := snap.Products(ctx, func(p catalog.Product) error {
		c := canonClaim(mongostore.ProductClaim(p))
		if err := claims.add(c.ID, c); err != nil {
			return err
		}
		return src.rows["products"].add(p.ID, canonProduct(p))
	}); err != nil {
		return src, err
	}
	if err := snap.Users(ctx, func(u account.User) error { return src.rows["users"].add(u.Email, canonUser(u)) }); err != nil {
		return src, err
	}
	if err := snap.Orders(ctx, func(o order.Order) error {
		for _, c := range mongostore.OrderClaims(o) {
			if err := claims.add(c.ID, canonClaim(c)); err != nil {
				return err
			}
		}
		return src.rows["orders"].add(o.ID, canonOrder(o))
	}); err != nil {
		return src, err
	}
	if err := snap.CartFences(ctx, func(id string, at time.Time) error {
		c := canonClaim(mongostore.FenceClaim(id, at))
		return claims.add(c.ID, c)
	}); err != nil {
		return src, err
	}
	placed, checkpoints, counters, err := pendingOutbox(ctx, snap, dst)
	if err != nil {
		return src, err
	}
	for _, m := range placed {
		m.At = ms(m.At)
		if err := src.rows["outbox"].add(outboxKey(m), m); err != nil {
			return src, err
		}
	}
	src.checkpoints, src.counters = checkpoints, counters
	return src, nil
}
