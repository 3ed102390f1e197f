package cassandrastore

import (
	"context"
	"net"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// BenchmarkStatementOverhead is the client layer's own work per statement, without a server:
// what the store and the driver's hooks do around one attempt of an idempotent statement on a
// 3-host cluster (the policy, the coordinator choice, the stream and attempt observers). Run in
// parallel, as a shop's requests are, so that shared locks show.
func BenchmarkStatementOverhead(b *testing.B) {
	var hosts []*gocql.HostInfo
	for i := range 3 {
		h, err := gocql.NewHostInfoFromAddrPort(net.IPv4(127, 0, 9, byte(i+1)), 9042)
		if err != nil {
			b.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	p := &policy{health: newHostHealth(), latency: newRecentP99(), cl: LevelsFor("")}
	tiered := &tieredHosts{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), health: p.health}
	for _, h := range hosts {
		tiered.AddHost(h)
	}
	replicas := pickFunc{fn: func() gocql.NextHost {
		i := 0
		return func() gocql.SelectedHost {
			if i == len(hosts) {
				return nil
			}
			i++
			return selected{hosts[i-1]}
		}
	}}
	qr := &quickRouting{HostSelectionPolicy: replicas, fallback: tiered, health: p.health}
	watch := attemptWatch{health: p.health, latency: p.latency, stmt: observer(func(string, time.Duration, error) {})}
	streams := streamWatch{p.health}
	stmts := []string{
		`SELECT items, version FROM user_carts WHERE user_id = ?`,
		`SELECT user_id, expires_at FROM sessions WHERE token = ?`,
		`INSERT INTO user_events (user_id, day, at, id, type, product_id) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`,
		`SELECT id, name, price FROM products_by_category WHERE category = ? AND bucket = ? LIMIT ?`,
		`UPDATE user_carts SET items = ?, version = ? WHERE user_id = ? IF version = ?`,
		`SELECT id, status, total FROM order_history WHERE user_id = ? AND bucket = ? LIMIT ?`,
	}
	session := &gocql.Session{}
	ctx := context.Background()
	start := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			stmt := stmts[i%len(stmts)]
			i++
			q := p.idempotent(ctx, session.Query(stmt).Consistency(gocql.Quorum))
			host := qr.Pick(stubStatement{q: q})().Info()
			streams.StreamStarted(gocql.ObservedStream{Host: host})
			streams.StreamFinished(gocql.ObservedStream{Host: host})
			watch.ObserveQuery(ctx, gocql.ObservedQuery{Statement: stmt, Query: q, Host: host,
				Start: start, End: start.Add(time.Duration(i%7) * time.Millisecond)})
		}
	})
}
