package cassandrastore

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// The benchmarks compare each repository operation with the same CQL statements issued raw
// through the driver (same consistency, same prepared statements, no mapping, no domain
// logic), so the ratio is what the repository layer costs; the cart put and first-put pairs
// instead set the repository's edit against the edit as it was before generations (a Paxos
// round per edit), raw, so their ratio is the new edit's cost over the old. The two run interleaved in the
// same goroutines (even operations through the repository, odd ones raw), so both see the
// same server and the same noise from a shared machine. Each pair reports, per side, the
// throughput W/mean latency (Little's law for W busy callers, W = 16), the p99 latency, and
// the overhead = repository mean latency / raw mean latency. Numbers: docs/evidence/benchmarks.md.
//
//	go test ./internal/store/cassandrastore -run '^$' -bench . -benchtime 4000x -count 3

const benchParallelism = 8 // x GOMAXPROCS goroutines

type opFunc func(ctx context.Context, i int64) error

// runPair measures repo against raw (storetest.BenchPair); both sides use index i as their key
// (Cassandra keys here are built from non-negative numbers).
func runPair(b *testing.B, repo, raw opFunc) {
	b.Helper()
	storetest.BenchPair(b, benchParallelism, storetest.PairOp(repo), storetest.PairOp(raw), func(_ int, i int64) int64 { return i })
}

func BenchmarkCarts(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Carts()
	ctx := context.Background()
	now := time.Now().UTC()
	// A pool of user carts, each with 5 lines, so reads and writes hit existing carts.
	const owners = 256
	users := make([]cart.Owner, owners)
	ids := make([]gocql.UUID, owners)
	for i := range users {
		users[i] = cart.User(fmt.Sprintf("bench-%d-%d", now.UnixNano(), i))
		var c cart.Cart
		var err error
		for j := 0; j < 5; j++ {
			c, err = r.PutItem(ctx, users[i], cart.Item{ProductID: fmt.Sprintf("p%d", j), Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now)
			if err != nil {
				b.Fatal(err)
			}
		}
		ids[i], _ = gocql.ParseUUID(c.ID)
	}
	t := userCarts.stmts
	// put: the repository's edit (a plain line write and the fence read) against, on other
	// carts, the edit as it was before generations: the same read, then the line and the
	// header's updated_at in one conditional batch (a Paxos round). Interleaved, so the ratio
	// is the edit path's saving under the same load.
	lwtIDs := make([]gocql.UUID, owners)
	for i := range lwtIDs {
		c, err := r.PutItem(ctx, cart.User(users[i].UserID+"-lwt"), cart.Item{ProductID: "p0", Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now)
		if err != nil {
			b.Fatal(err)
		}
		lwtIDs[i], _ = gocql.ParseUUID(c.ID)
	}
	lwtPut := `UPDATE user_carts USING TTL ? SET category = ?, quantity = ?, added_at = ? WHERE user_id = ? AND cart_id = ? AND product_id = ?`
	lwtEdit := `UPDATE user_carts USING TTL ? SET updated_at = ? WHERE user_id = ? AND cart_id = ? AND product_id = '' ` + editIf
	b.Run("put", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			_, err := r.PutItem(ctx, users[i%owners], cart.Item{ProductID: fmt.Sprintf("p%d", i%8), Category: "c", Quantity: i%9 + 1, AddedAt: now}, time.Time{}, now)
			return err
		}, func(ctx context.Context, i int64) error {
			u := users[i%owners].UserID + "-lwt"
			iter := s.Query(t.readCart, u, lwtIDs[i%owners]).WithContext(ctx).Consistency(cas1.Carts).Idempotent(true).Iter()
			if err := drainCartRead(iter); err != nil {
				return err
			}
			bt := s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(cas1.Carts).SerialConsistency(cas1.Serial)
			bt.Query(lwtPut, 0, "c", i%9+1, now, u, lwtIDs[i%owners], fmt.Sprintf("p%d", i%8))
			bt.Query(lwtEdit, 0, now, u, lwtIDs[i%owners], lwtIDs[i%owners])
			return execRawCAS(bt)
		})
	})
	// The first item of a new owner against, for other new owners, the same as it was before
	// generations: the read, the LWT creating the cart, the conditional batch of the line.
	b.Run("first-put", func(b *testing.B) {
		// New owners on every run (-count repeats this closure, not the setup above).
		fresh := fmt.Sprintf("bench-%d-new-", time.Now().UnixNano())
		runPair(b, func(ctx context.Context, i int64) error {
			_, err := r.PutItem(ctx, cart.User(fmt.Sprintf("%sr%d", fresh, i)), cart.Item{ProductID: "p1", Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now)
			return err
		}, func(ctx context.Context, i int64) error {
			u := fmt.Sprintf("%sd%d", fresh, i)
			iter := s.Query(t.read, u).WithContext(ctx).Consistency(cas1.Carts).Idempotent(true).Iter()
			if err := drainCartRead(iter); err != nil {
				return err
			}
			id := gocql.TimeUUID()
			if _, err := s.Query(t.create, 0, id, nil, now, now, nil, nil, nil, u, id, nil).WithContext(ctx).Consistency(cas1.Carts).
				SerialConsistency(cas1.Serial).MapScanCAS(map[string]any{}); err != nil {
				return err
			}
			bt := s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(cas1.Carts).SerialConsistency(cas1.Serial)
			bt.Query(lwtPut, 0, "c", int64(1), now, u, id, "p1")
			bt.Query(lwtEdit, 0, now, u, id, id)
			return execRawCAS(bt)
		})
	})
	b.Run("get", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			_, err := r.ActiveCart(ctx, users[i%owners], now)
			return err
		}, func(ctx context.Context, i int64) error {
			iter := s.Query(t.read, users[i%owners].UserID).WithContext(ctx).Consistency(cas1.Carts).Idempotent(true).Iter()
			return drainCartRead(iter)
		})
	})
}

// drainCartRead scans a cart read (the columns of cartCols) and discards it.
func drainCartRead(iter *gocql.Iter) error {
	var row cartRow
	for iter.Scan(row.dest()...) {
	}
	return iter.Close()
}

// execRawCAS runs a cart edit's conditional batch as the driver offers it.
func execRawCAS(b *gocql.Batch) error {
	_, iter, err := b.MapExecCAS(map[string]any{})
	if iter != nil {
		_ = iter.Close()
	}
	return err
}

func BenchmarkSessions(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Sessions()
	now := time.Now().UTC()
	prefix := fmt.Sprintf("bench-%d-", now.UnixNano())
	mk := func(i int64) session.Session {
		return session.Session{ID: fmt.Sprintf("%s%d", prefix, i), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour),
			IP: "203.0.113.7", UserAgent: "bench/1.0", Status: session.StatusActive, Data: map[string]string{"locale": "ru"}}
	}
	b.Run("create", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			return r.CreateSession(ctx, mk(i))
		}, func(ctx context.Context, i int64) error {
			x := mk(-i)
			return s.Query(sessionInsert, x.ID, nil, x.CreatedAt, x.LastActive, x.ExpiresAt, x.IP, x.UserAgent, string(x.Status), x.Data, 3600).
				WithContext(ctx).Consistency(cas1.SessionWrites).Idempotent(true).Exec()
		})
	})
	const n = 1000 // sessions to read, written once up front
	for i := int64(1); i <= n; i++ {
		if err := r.CreateSession(context.Background(), mk(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("get", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			_, err := r.GetSession(ctx, fmt.Sprintf("%s%d", prefix, 1+i%n), now)
			return err
		}, func(ctx context.Context, i int64) error {
			var x session.Session
			var user, status *string
			var ip net.IP
			return s.Query(sessionSelect, fmt.Sprintf("%s%d", prefix, 1+i%n)).WithContext(ctx).Consistency(cas1.Sessions).Idempotent(true).
				Scan(&x.ID, &user, &x.CreatedAt, &x.LastActive, &x.ExpiresAt, &ip, &x.UserAgent, &status, &x.Data)
		})
	})
}

func BenchmarkEvents(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Events()
	day := event.Day(time.Now())
	prefix := fmt.Sprintf("u:bench-%d-", time.Now().UnixNano())
	const actors = 64
	b.Run("append", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			return r.AppendEvent(ctx, event.Event{ID: fmt.Sprintf("e%d", i), Actor: fmt.Sprintf("%s%d", prefix, i%actors), Type: event.View,
				At: day.Add(time.Duration(i) * time.Millisecond), ProductID: "p1", Details: map[string]string{"src": "bench"}})
		}, func(ctx context.Context, i int64) error {
			return s.Query(eventInsert, fmt.Sprintf("%s%d", prefix, i%actors), day, day.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("r%d", i),
				"view", "p1", map[string]string{"src": "bench"}).WithContext(ctx).Consistency(cas1.Events).Idempotent(true).Exec()
		})
	})
	b.Run("list20", func(b *testing.B) {
		runPair(b, func(ctx context.Context, i int64) error {
			_, err := r.ListEvents(ctx, event.Query{Actor: fmt.Sprintf("%s%d", prefix, i%actors), Day: day, Page: paging.Request{Limit: 20}})
			return err
		}, func(ctx context.Context, i int64) error {
			iter := s.Query(eventList, fmt.Sprintf("%s%d", prefix, i%actors), day).WithContext(ctx).Consistency(cas1.Events).
				Idempotent(true).PageSize(20).PageState(nil).Iter()
			var e event.Event
			var typ string
			for iter.Scan(&e.Actor, &e.At, &e.ID, &typ, &e.ProductID, &e.Details) {
			}
			_ = iter.PageState()
			return iter.Close()
		})
	})
}

// BenchmarkCartReadByKey compares the cart reads of a returning customer (three earlier
// orders of 5 lines behind a 5-line active cart) with and without the remembered active cart
// id: "raw" reads the partition's head (24 rows), "repo" the active cart by its exact key (6
// rows). Both run on one session, interleaved operation by operation (runPair), each side on
// its own owners; p50 exact/head is repo-p50-ms over raw-p50-ms.
//
//	go test ./internal/store/cassandrastore -run '^$' -bench CartReadByKey -benchtime 2000x -count 3
func BenchmarkCartReadByKey(b *testing.B) {
	st := store(b)
	head, key := (*carts)(&Store{s: st.s, p: st.p}), otherProcess(st)
	ctx := context.Background()
	now := time.Now().UTC()
	// Each side's owners; a checkout of one owner meets another of the same owner only if a
	// worker stalls for 128 operations.
	const owners = 128
	var users [2][]cart.Owner
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for side, r := range []*carts{key, head} {
		for i := 0; i < owners; i++ {
			u := cart.User(fmt.Sprintf("bench-key-%d-%d-%d", now.UnixNano(), side, i))
			users[side] = append(users[side], u)
			g.Go(func() error { return returningCustomer(gctx, r, u, now) })
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	put := func(r *carts, side int) opFunc {
		return func(ctx context.Context, i int64) error {
			_, err := r.PutItem(ctx, users[side][i%owners], cart.Item{ProductID: fmt.Sprintf("p%d", i%5), Category: "c", Quantity: i%9 + 1, AddedAt: now}, time.Time{}, now)
			return err
		}
	}
	b.Run("put", func(b *testing.B) { runPair(b, put(key, 0), put(head, 1)) })
	// A checkout's cart side: the freeze (a read, the LWT, a SERIAL read) and the release.
	checkout := func(r *carts, side int) opFunc {
		return func(ctx context.Context, i int64) error {
			u, o := users[side][i%owners], fmt.Sprintf("o-%d-%d", side, i)
			c, err := r.BeginCheckout(ctx, u, o, now.Add(time.Minute), now)
			if err != nil {
				return err
			}
			return r.EndCheckout(ctx, u, c.ID, o, now)
		}
	}
	b.Run("checkout", func(b *testing.B) { runPair(b, checkout(key, 0), checkout(head, 1)) })
}

// returningCustomer gives u three ordered carts and an active one, of 5 lines each.
func returningCustomer(ctx context.Context, r *carts, u cart.Owner, now time.Time) error {
	for k := 0; k < 4; k++ {
		var c cart.Cart
		var err error
		for j := 0; j < 5; j++ {
			if c, err = r.PutItem(ctx, u, cart.Item{ProductID: fmt.Sprintf("p%d", j), Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now); err != nil {
				return err
			}
		}
		if k < 3 {
			if err := r.MarkOrdered(ctx, u, c.ID, fmt.Sprintf("o%d", k), now); err != nil {
				return err
			}
		}
	}
	return nil
}
