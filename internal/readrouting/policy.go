// Package readrouting decides, per read operation, whether shardmart reads
// from the primary or may read from a secondary (RPL-1's table).
//
// MongoDB's maxStalenessSeconds cannot go below 90 s, so it cannot enforce
// RPL-1's 5 s and 10 s budgets. Instead a Monitor measures each secondary's
// replication lag periodically, and the Policy sends an operation to
// secondaries only when every secondary that mongos might pick is within the
// operation's budget, counting the measurement's age and uncertainty;
// otherwise, or when lag is unknown or stale, the read goes to the primary.
//
// How lag is measured. Each round runs replSetGetStatus on every set's primary
// and takes, per member, lag = status date − member's lastAppliedWallTime. Both
// are the primary's clock in milliseconds (optimeDate, which the first version
// used, is whole seconds and is zeroed for an unreachable member). The member
// holds every write stamped at or before its applied time, so this is an upper
// bound of its staleness when the status was taken, never an underestimate —
// even if nothing keeps it tight. What keeps it tight is a heartbeat document:
// an idle primary advances its applied time only every ~10 s (its no-op
// writer), so a caught-up secondary would read up to 10 s behind; the Monitor
// therefore upserts {_id: <set>, ts: <now>} into shardmart_monitor.heartbeat
// on each set's primary every 500 ms (w:1), and a caught-up secondary then
// reads at most ~0.5 s behind. (Against the primary's own lastAppliedWallTime
// instead of the date, a failing heartbeat — e.g. a monitor user without write
// access — would bring the underestimate back; against the date it only costs
// primary reads.) The snapshot is stamped when its round starts, so the
// Policy's age term covers the round itself.
//
// Why not read the heartbeat document back from every secondary (staleness =
// round start − ts read there): it needs a connection to every member, and a
// frozen or partitioned member (the case that matters) hangs that read until a
// timeout, whereas the primary's status answers at once and says which members
// it has not heard from. A member the primary has not heard from for two
// heartbeat intervals (lastHeartbeatRecv), or with health 0, is never fresh:
// drivers and mongos may still pick it, so every secondary read goes to the
// primary until it is heard again. Nor is a member whose applied optime is from
// an earlier term than the primary's: a primary frozen through a failover and
// resumed reports an applied time from writes in its old term (a rollback undoes
// them), and the status may still call it PRIMARY while drivers already read it
// as a SECONDARY. So every member but the primary and arbiters counts, whatever
// its state.
//
// Shard connections may use their own credentials (Credentials): on a sharded
// cluster the mongos users do not exist on the shards. The monitor user needs
// clusterMonitor (replSetGetStatus) and readWrite on shardmart_monitor.
package readrouting

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Operation names one read the application makes.
type Operation string

// The reads of RPL-1's table, plus the carts read.
const (
	OpOrderHistory    Operation = "orders.history"     // ORD-2
	OpOrderStatus     Operation = "orders.status"      // ORD-3, any status but paid
	OpOrderStatusPaid Operation = "orders.status_paid" // ORD-3, checking for "paid"
	OpStock           Operation = "products.stock"     // PRD-1
	OpCategorySearch  Operation = "products.search"    // PRD-2
	OpProductPage     Operation = "products.page"      // PRD-3
	OpCheckoutPrice   Operation = "products.price"     // PRD-4, at checkout
	OpCart            Operation = "carts.current"      // CRT-2, user and guest
)

// Rule is one row of the read table: an operation and its staleness budget;
// a zero budget means primary only.
type Rule struct {
	Op         Operation
	Collection string
	Budget     time.Duration
	Why        string
}

// PrimaryOnly reports whether the rule never reads from a secondary.
func (r Rule) PrimaryOnly() bool { return r.Budget <= 0 }

// Table is RPL-1's per-operation read table, in the requirement's order.
func Table() []Rule {
	return []Rule{
		{OpOrderHistory, "orders", 10 * time.Second, "history is the outcome of finished orders; a noticeable but harmless delay"},
		{OpOrderStatus, "orders", 5 * time.Second, "status shown to the user changes rarely; 5 s goes unnoticed"},
		{OpOrderStatusPaid, "orders", 0, "a stale \"not paid\" can make the user pay twice"},
		{OpStock, "products", 0, "a stale stock level oversells"},
		{OpCategorySearch, "products", 5 * time.Second, "categories and prices change rarely; search is the most frequent read"},
		{OpProductPage, "products", 5 * time.Second, "descriptions change rarely"},
		{OpCheckoutPrice, "products", 0, "the price charged must be current (promotions, losses)"},
		{OpCart, "carts", 0, "carts change constantly (add, remove, merge)"},
	}
}

// Policy turns the table and a lag snapshot into a read preference.
type Policy struct {
	rules map[Operation]Rule
	// Uncertainty is added to every measured lag. The measurement (status date −
	// lastAppliedWallTime) is already an upper bound as long as one clock stamped
	// both; after a failover the member's applied time was stamped by the old
	// primary's clock and the date by the new one's, so the bound is off by their
	// skew. The default, one heartbeat interval (500 ms), covers NTP-synchronised
	// servers; it was 2 s when lag came from heartbeat-derived optimes.
	Uncertainty time.Duration
	// MaxSnapshotAge: an older snapshot counts as unknown lag.
	MaxSnapshotAge time.Duration
	// Backstop is the maxStaleness put on secondary reads (90 s is the
	// server's minimum): if a secondary falls far behind between two
	// measurements, the driver and mongos still refuse it.
	Backstop time.Duration
	now      func() time.Time
}

// NewPolicy builds the policy for RPL-1's table.
func NewPolicy() Policy { return NewPolicyFor(Table()) }

// NewPolicyFor builds a policy over any table (tests, other services).
func NewPolicyFor(rules []Rule) Policy {
	p := Policy{
		rules:          make(map[Operation]Rule, len(rules)),
		Uncertainty:    DefaultHeartbeatInterval,
		MaxSnapshotAge: 5 * time.Second,
		Backstop:       90 * time.Second,
		now:            time.Now,
	}
	for _, r := range rules {
		p.rules[r.Op] = r
	}
	return p
}

// Rule returns the table row of op; unknown operations are primary-only.
func (p Policy) Rule(op Operation) Rule {
	if r, ok := p.rules[op]; ok {
		return r
	}
	return Rule{Op: op, Why: "unknown operation: primary by default"}
}

// Target says where a read goes.
type Target int

const (
	Primary Target = iota
	Secondary
)

func (t Target) String() string {
	if t == Secondary {
		return "secondary"
	}
	return "primary"
}

// Decision is the outcome for one read, with the reason for logs and metrics.
type Decision struct {
	Op     Operation
	Target Target
	// Budget is the operation's staleness budget from the table (0: primary only).
	Budget time.Duration
	// WorstLag is the bound compared with the budget (lag + age + uncertainty).
	WorstLag time.Duration
	Reason   string
}

// The outcomes of a decision, as the routed-reads metric labels them.
const (
	// OutcomeSecondary: the read may go to a secondary (every secondary within its budget).
	OutcomeSecondary = "secondary"
	// OutcomePrimaryNoFreshMember: the operation has a budget, but no secondary could be
	// vouched for within it: one lags past it, is unreachable or on an old term, or the lag is
	// not known (not measured yet, the snapshot too old, a set's status unreadable).
	OutcomePrimaryNoFreshMember = "primary_no_fresh_member"
	// OutcomePrimaryByRule: the table says primary only (stock, checkout price, paid status,
	// carts, unknown operations).
	OutcomePrimaryByRule = "primary_by_rule"
)

// Outcome names the decision for metrics: one of the Outcome constants.
func (d Decision) Outcome() string {
	switch {
	case d.Target == Secondary:
		return OutcomeSecondary
	case d.Budget <= 0:
		return OutcomePrimaryByRule
	}
	return OutcomePrimaryNoFreshMember
}

// Decide applies the policy at time now.
func (p Policy) Decide(op Operation, snap LagSnapshot, now time.Time) Decision {
	r := p.Rule(op)
	d := Decision{Op: op, Target: Primary, Budget: max(r.Budget, 0)}
	if r.PrimaryOnly() {
		d.Reason = "primary-only operation"
		return d
	}
	if snap.MeasuredAt.IsZero() {
		d.Reason = "replication lag not measured yet"
		return d
	}
	if len(snap.Errors) > 0 {
		shard := slices.Sorted(maps.Keys(snap.Errors))[0]
		d.Reason = fmt.Sprintf("lag of shard %s unknown: %s", shard, snap.Errors[shard])
		return d
	}
	age := now.Sub(snap.MeasuredAt)
	if age < 0 {
		age = 0
	}
	if age > p.MaxSnapshotAge {
		d.Reason = fmt.Sprintf("lag snapshot is %s old (max %s)", age.Round(time.Millisecond), p.MaxSnapshotAge)
		return d
	}
	// mongos may pick any SECONDARY of a shard (within its latency window),
	// so the worst one decides. A shard without secondaries is fine: with
	// secondaryPreferred mongos reads its primary, which is never stale.
	secondaries := 0
	var worst time.Duration
	for _, m := range snap.Members {
		// A member its primary cannot hear from may be frozen or cut off while drivers
		// and mongos still list it as a SECONDARY: never count it fresh, whatever the
		// primary now calls it.
		if m.Unreachable {
			d.Reason = fmt.Sprintf("%s/%s unreachable from its primary (%s, last heartbeat from it %s ago)",
				m.Shard, m.Host, m.State, m.HeardAgo.Round(time.Millisecond))
			if m.HeardAgo == 0 {
				d.Reason = fmt.Sprintf("%s/%s unreachable from its primary (%s, never heard from)", m.Shard, m.Host, m.State)
			}
			return d
		}
		// Every data-bearing member but the primary counts, whatever the status calls it: the
		// status has each member's state from its last heartbeat (every 2 s), while a driver
		// sees a member turn SECONDARY (after a rollback, a recovery, a step-down) as soon as
		// its own monitor asks. A deposed primary the status still calls PRIMARY is one of
		// them: it is recognised by its old term.
		if m.State == StateArbiter || (m.State == StatePrimary && !m.OldTerm) {
			continue
		}
		if !m.Known {
			d.Reason = fmt.Sprintf("lag of %s/%s unknown", m.Shard, m.Host)
			if m.OldTerm {
				d.Reason = fmt.Sprintf("%s/%s (%s) has applied nothing of its primary's term: its applied time cannot vouch for it", m.Shard, m.Host, m.State)
			}
			return d
		}
		secondaries++
		worst = max(worst, m.Lag)
	}
	if secondaries == 0 {
		d.Reason = "no secondary in the snapshot"
		return d
	}
	// Lag can grow by at most the time elapsed since it was measured.
	d.WorstLag = worst + age + p.Uncertainty
	if d.WorstLag > r.Budget {
		d.Reason = fmt.Sprintf("worst secondary lag %s > budget %s", d.WorstLag.Round(time.Millisecond), r.Budget)
		return d
	}
	d.Target = Secondary
	d.Reason = fmt.Sprintf("worst secondary lag %s <= budget %s", d.WorstLag.Round(time.Millisecond), r.Budget)
	return d
}

// ReadPref is the read preference for op given the latest lag snapshot:
// readpref.Primary(), or secondaryPreferred with the 90 s backstop (falling
// back to the primary is always safe for consistency).
func (p Policy) ReadPref(op Operation, snap LagSnapshot) *readpref.ReadPref {
	now := time.Now
	if p.now != nil { // the zero Policy has no clock of its own
		now = p.now
	}
	return p.ReadPrefFor(p.Decide(op, snap, now()))
}

// ReadPrefFor maps a decision to the driver's read preference.
func (p Policy) ReadPrefFor(d Decision) *readpref.ReadPref {
	if d.Target == Secondary {
		return readpref.SecondaryPreferred(readpref.WithMaxStaleness(p.Backstop))
	}
	return readpref.Primary()
}
