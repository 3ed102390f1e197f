package readrouting_test

import (
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/readrouting"
)

func ExamplePolicy_Decide() {
	measured := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	snap := readrouting.LagSnapshot{MeasuredAt: measured, Members: []readrouting.MemberLag{
		{Shard: "shard1", Host: "shard1-a:27018", State: readrouting.StatePrimary, Known: true},
		{Shard: "shard1", Host: "shard1-b:27018", State: readrouting.StateSecondary, Lag: 1500 * time.Millisecond, Known: true},
		{Shard: "shard2", Host: "shard2-b:27018", State: readrouting.StateSecondary, Lag: 4500 * time.Millisecond, Known: true},
	}}
	p := readrouting.NewPolicy()
	now := measured.Add(500 * time.Millisecond)
	for _, op := range []readrouting.Operation{readrouting.OpOrderHistory, readrouting.OpProductPage, readrouting.OpStock} {
		d := p.Decide(op, snap, now)
		fmt.Printf("%s → %s (%s)\n", op, d.Target, d.Reason)
	}
	// Output:
	// orders.history → secondary (worst secondary lag 5.5s <= budget 10s)
	// products.page → primary (worst secondary lag 5.5s > budget 5s)
	// products.stock → primary (primary-only operation)
}
