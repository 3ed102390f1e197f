// Package event owns the append-only click stream (EVT-1): one partition per actor per day,
// read newest first with an optional type filter.
package event

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

// Type of an event.
type Type string

const (
	View      Type = "view"
	Click     Type = "click"
	AddToCart Type = "add_to_cart"
	Search    Type = "search"
)

// ParseType accepts a known event type.
func ParseType(s string) (Type, bool) {
	switch t := Type(s); t {
	case View, Click, AddToCart, Search:
		return t, true
	}
	return "", false
}

// Event is one user action. Actor is the owner key of who acted ("u:<id>" or "s:<session>").
type Event struct {
	ID        string
	Actor     string
	Type      Type
	At        time.Time
	ProductID string
	Details   map[string]string
}

// Query reads one actor's events of one UTC day, newest first.
type Query struct {
	Actor string
	Day   time.Time // any instant of the day; backends truncate to the UTC date
	Type  Type      // empty: all types
	Page  paging.Request
}

// DefaultRetention is how long events are kept: 90 days, the events table's TTL on Cassandra.
const DefaultRetention = 90 * 24 * time.Hour

// Expiry is when an event that happened at `at` leaves the store under retention (0:
// DefaultRetention). Backends whose rows expire by themselves write it as the TTL.
func Expiry(at time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return at.Add(retention)
}

// Cutoff is the instant before which events are past the retention at now: what a purge deletes.
func Cutoff(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return now.Add(-retention)
}

// Repository stores events.
type Repository interface {
	// AppendEvent stores e; an event already past the retention may be dropped instead.
	//dualwrite:write
	AppendEvent(ctx context.Context, e Event) error
	//dualwrite:read
	ListEvents(ctx context.Context, q Query) (paging.Page[Event], error)
	// PurgeEvents deletes events that happened before `before` and says how many. A backend
	// whose rows expire by themselves (Cassandra's TTL from the event's time) returns 0.
	//dualwrite:unmirrored
	PurgeEvents(ctx context.Context, before time.Time) (int, error)
}

// Day truncates an instant to its UTC date, the partition of EVT-1.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Validate checks an event before it is appended.
func (e Event) Validate() error {
	var c validation.Collector
	_, ok := ParseType(string(e.Type))
	c.Check(ok, "type", "must be one of view, click, add_to_cart, search")
	// Lengths are in characters, as the OpenAPI document's maxLength counts them.
	c.Check(utf8.RuneCountInString(e.ProductID) <= 64, "product_id", "at most 64 characters")
	c.Check(len(e.Details) <= 20, "details", "at most 20 entries")
	for k, v := range e.Details {
		kn := utf8.RuneCountInString(k)
		c.Check(kn >= 1 && kn <= 64 && utf8.RuneCountInString(v) <= 512, "details."+k, "keys 1-64 and values up to 512 characters")
	}
	return c.Err()
}
