package robustness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/testkit/faultnet"
)

// memberAddr is member i's host, port and process.
func memberAddr(s *launcher.Set, i int) (host string, port, pid int, err error) {
	host, p, err := net.SplitHostPort(s.Members()[i].Host)
	if err != nil {
		return "", 0, 0, err
	}
	port, _ = strconv.Atoi(p)
	pid, ok := s.PID(i)
	if !ok {
		return "", 0, 0, fmt.Errorf("member %d is not running", i)
	}
	return host, port, pid, nil
}

// cutApart cuts members a and b apart from each other only (faultnet.CutBetween) and counts
// on it only once probes from each side's cgroup to the other's port get no answer while this
// process (where the shop's driver runs) still connects to both.
func cutApart(ctx context.Context, t *testing.T, chain *faultnet.Chain, s *launcher.Set, a, b int) error {
	ha, pa, pidA, err := memberAddr(s, a)
	if err != nil {
		return err
	}
	hb, pb, pidB, err := memberAddr(s, b)
	if err != nil {
		return err
	}
	if err := chain.CutBetween(ctx, t, pidA, pa, pidB, pb); err != nil {
		return err
	}
	for _, p := range []struct {
		from, to, pid, port int
		host                string
	}{{a, b, pidA, pb, hb}, {b, a, pidB, pa, ha}} {
		if err := chain.DialFrom(ctx, p.pid, p.host, p.port, time.Second); !errors.Is(err, faultnet.ErrNoAnswer) {
			return fmt.Errorf("member %d to member %d: want a probe from its cgroup to get no answer, got %v", p.from, p.to, err)
		}
	}
	for _, m := range []struct {
		host string
		port int
	}{{ha, pa}, {hb, pb}} {
		if err := faultnet.Dial(ctx, 0, m.host, m.port, 5*time.Second); err != nil {
			return fmt.Errorf("the shop's path to %s:%d is cut too: %w", m.host, m.port, err)
		}
	}
	return nil
}

// deposedNemesis cuts the primary from both its peers while the shop's driver still reaches
// it: on 3 members, the majority/minority split with the old primary alone. Counted on once
// the cut is probed both ways, a peer is primary and reports the victim down, and the victim
// itself no longer says it is primary (it stepped down for want of a majority). Writes that
// reach it before that wait for a majority that never comes: they must end refused or
// unknown, never acknowledged and rolled back after the heal.
func deposedNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	chain := faultnet.New(t)
	heal := func(ctx context.Context) error { return chain.Heal(ctx) }
	for i := range s.Members() {
		if i != victim {
			if err := cutApart(ctx, t, chain, s, victim, i); err != nil {
				return heal, err
			}
		}
	}
	if err := cutOffFromPeers(ctx, s, victim); err != nil {
		return heal, err
	}
	wctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	return heal, eventually.Until(wctx, func() error {
		st, err := memberStatus(wctx, s, victim)
		if err != nil {
			return err
		}
		if st.MyState == 1 {
			return fmt.Errorf("member %d, cut from its peers, still says it is primary", victim)
		}
		return nil
	})
}

// bridgeNemesis cuts the victim (the primary) from the next member only; the third sees both.
// Counted on once the cut is probed both ways and each of the two reports the other down
// while the third reports both up.
func bridgeNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	n := len(s.Members())
	a, b, c := victim, (victim+1)%n, (victim+2)%n
	chain := faultnet.New(t)
	heal := func(ctx context.Context) error { return chain.Heal(ctx) }
	if err := cutApart(ctx, t, chain, s, a, b); err != nil {
		return heal, err
	}
	wctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	return heal, eventually.Until(wctx, func() error {
		for _, v := range []struct {
			from, of int
			up       bool
		}{{a, b, false}, {b, a, false}, {c, a, true}, {c, b, true}} {
			st, err := memberStatus(wctx, s, v.from)
			if err != nil {
				return err
			}
			m, ok := st.member(s, v.of)
			if !ok {
				return fmt.Errorf("member %d does not list member %d", v.from, v.of)
			}
			if up := m.Health == 1; up != v.up {
				return fmt.Errorf("member %d sees member %d up: %v, want %v", v.from, v.of, up, v.up)
			}
		}
		return nil
	})
}

// lagNemesis makes a secondary fall behind while it stays up and answers reads: fsyncLock
// stops it applying the oplog (its heartbeats go on), fsyncUnlock on heal. Counted on once the
// primary reports it healthy and its applied time at least a second behind. Held past the
// history's 10 s budget, so that reads routed to it would come back staler than the read
// table allows unless the lag is measured and they are routed away.
func lagNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(s.MemberURI(victim)))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	admin := c.Database("admin")
	heal := func(ctx context.Context) error {
		for range 10 { // a lock taken twice needs two unlocks
			var res struct {
				LockCount int `bson:"lockCount"`
			}
			err := admin.RunCommand(ctx, bson.D{{Key: "fsyncUnlock", Value: 1}}).Decode(&res)
			var ce mongo.CommandError
			if errors.As(err, &ce) && ce.Name == "IllegalOperation" { // not locked
				return nil
			}
			if err != nil || res.LockCount == 0 {
				return err
			}
		}
		return fmt.Errorf("member %d still fsync-locked after 10 unlocks", victim)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "fsync", Value: 1}, {Key: "lock", Value: true}}).Err(); err != nil {
		return heal, fmt.Errorf("fsyncLock member %d: %w", victim, err)
	}
	wctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	return heal, eventually.Until(wctx, func() error {
		p := s.Primary(wctx)
		if p < 0 || p == victim {
			return fmt.Errorf("no other primary (primary: %d)", p)
		}
		st, err := memberStatus(wctx, s, p)
		if err != nil {
			return err
		}
		m, ok := st.member(s, victim)
		switch {
		case !ok:
			return fmt.Errorf("primary %d does not list member %d", p, victim)
		case m.Health != 1:
			return fmt.Errorf("primary %d reports member %d down, not lagging", p, victim)
		case st.Date.Sub(m.LastAppliedWallTime) < time.Second:
			return fmt.Errorf("member %d is %s behind, want ≥ 1s", victim, st.Date.Sub(m.LastAppliedWallTime))
		}
		return nil
	})
}

// replStatus is the part of replSetGetStatus the nemeses look at.
type replStatus struct {
	Date    time.Time     `bson:"date"`
	MyState int           `bson:"myState"`
	Members []memberEntry `bson:"members"`
}

type memberEntry struct {
	Name                string    `bson:"name"`
	Health              float64   `bson:"health"`
	LastAppliedWallTime time.Time `bson:"lastAppliedWallTime"`
}

// member is member i's entry.
func (st replStatus) member(s *launcher.Set, i int) (memberEntry, bool) {
	for _, m := range st.Members {
		if m.Name == s.Members()[i].Host {
			return m, true
		}
	}
	return memberEntry{}, false
}

// memberStatus is replSetGetStatus as member i sees the set.
func memberStatus(ctx context.Context, s *launcher.Set, i int) (replStatus, error) {
	var st replStatus
	// A bridge check that ran out of its 20 s at a load of 15 ended on a 1 s server selection
	// of a new client; the caller's ctx bounds the whole wait.
	c, err := mongo.Connect(options.Client().ApplyURI(s.MemberURI(i)).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		return st, err
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
		return st, fmt.Errorf("replSetGetStatus on member %d: %w", i, err)
	}
	return st, nil
}
