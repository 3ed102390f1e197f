package mongomove

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
// fenced carts), the outbox messages not yet applied everywhere, and the consumers'
// checkpoints. Times compare at MongoDB's millisecond precision.
func Compare(ctx context.Context, src *sqlitestore.DB, dst *mongostore.Store) (Report, error) {
	snap, err := src.ReadSnapshot(ctx)
	if err != nil {
		return Report{}, err
	}
	defer snap.Close()
	var rep Report
	pair := func() (digest, digest) { return digest{}, digest{} }

	ps, pd := pair()
	cs, cd := pair()
	if err := snap.Products(ctx, func(p catalog.Product) error {
		c := canonClaim(mongostore.ProductClaim(p))
		if err := cs.add(c.ID, c); err != nil {
			return err
		}
		return ps.add(p.ID, canonProduct(p))
	}); err != nil {
		return rep, err
	}
	if err := dst.EachProduct(ctx, func(p catalog.Product) error { return pd.add(p.ID, canonProduct(p)) }); err != nil {
		return rep, err
	}
	rep.Collections = append(rep.Collections, compareDigests("products", ps, pd))

	us, ud := pair()
	if err := snap.Users(ctx, func(u account.User) error { return us.add(u.Email, canonUser(u)) }); err != nil {
		return rep, err
	}
	if err := dst.EachUser(ctx, func(u account.User) error { return ud.add(u.Email, canonUser(u)) }); err != nil {
		return rep, err
	}
	rep.Collections = append(rep.Collections, compareDigests("users", us, ud))

	os, od := pair()
	if err := snap.Orders(ctx, func(o order.Order) error {
		for _, c := range mongostore.OrderClaims(o) {
			if err := cs.add(c.ID, canonClaim(c)); err != nil {
				return err
			}
		}
		return os.add(o.ID, canonOrder(o))
	}); err != nil {
		return rep, err
	}
	if err := dst.EachOrder(ctx, func(o order.Order) error { return od.add(o.ID, canonOrder(o)) }); err != nil {
		return rep, err
	}
	rep.Collections = append(rep.Collections, compareDigests("orders", os, od))

	if err := snap.CartFences(ctx, func(id string, at time.Time) error {
		c := canonClaim(mongostore.FenceClaim(id, at))
		return cs.add(c.ID, c)
	}); err != nil {
		return rep, err
	}
	if err := dst.EachClaim(ctx, func(c mongostore.ClaimRow) error { return cd.add(c.ID, canonClaim(c)) }); err != nil {
		return rep, err
	}
	rep.Collections = append(rep.Collections, compareDigests("claims", cs, cd))

	placed, checkpoints, counters, err := pendingOutbox(ctx, snap, dst)
	if err != nil {
		return rep, err
	}
	xs, xd := pair()
	outboxKey := func(m mongostore.PlacedMessage) string { return fmt.Sprintf("%d/%d", m.Partition, m.Seq) }
	for _, m := range placed {
		m.At = ms(m.At)
		if err := xs.add(outboxKey(m), m); err != nil {
			return rep, err
		}
	}
	if err := dst.EachOutbox(ctx, func(m mongostore.PlacedMessage) error {
		m.At = ms(m.At)
		return xd.add(outboxKey(m), m)
	}); err != nil {
		return rep, err
	}
	rep.Collections = append(rep.Collections, compareDigests("outbox", xs, xd))

	ks, kd := pair()
	for c, seqs := range checkpoints {
		got, err := dst.OutboxCheckpoints(ctx, c)
		if err != nil {
			return rep, err
		}
		for p := range seqs {
			key := fmt.Sprintf("%s/%d", c, p)
			if err := ks.add(key, seqs[p]); err != nil {
				return rep, err
			}
			if p < len(got) {
				if err := kd.add(key, got[p]); err != nil {
					return rep, err
				}
			}
		}
	}
	rep.Collections = append(rep.Collections, compareDigests("outbox_checkpoints", ks, kd))

	ns, nd := pair()
	got, err := dst.OutboxCounters(ctx)
	if err != nil {
		return rep, err
	}
	for p, n := range counters {
		if err := ns.add(fmt.Sprint(p), n); err != nil {
			return rep, err
		}
		if p < len(got) {
			if err := nd.add(fmt.Sprint(p), got[p]); err != nil {
				return rep, err
			}
		}
	}
	rep.Collections = append(rep.Collections, compareDigests("outbox_counters", ns, nd))
	return rep, nil
}
