package placement

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
)

// Backends whose methods are never reached: the decorator under test must report the call
// while the nil embedded interface panics.
type (
	nilOrders   struct{ order.Repository }
	nilProducts struct{ catalog.Repository }
	nilOutbox   struct{ outbox.Log }
	nilUsers    struct{ account.Repository }
	nilCarts    struct{ cart.Repository }
	nilSessions struct{ session.Repository }
	nilEvents   struct{ event.Repository }
	nilHistory  struct{ history.Repository }
	nilCatalog  struct{ CatalogReader }
	nilSink     struct{ projection.CatalogSink }
)

type partitionedOutbox struct{ nilOutbox }

func (partitionedOutbox) Partitions() []outbox.Log { return []outbox.Log{nilOutbox{}, nilOutbox{}} }

type call struct{ backend, op string }

func recorder(calls *[]call) timer {
	return timer{backend: "b", observe: func(backend, op string, _ time.Duration, _ error) {
		*calls = append(*calls, call{backend, op})
	}}
}

// snake is the op spelling of a method name: ByIdempotencyKey -> by_idempotency_key.
func snake(method string) string {
	var b strings.Builder
	for i, r := range method {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// TestObservedOpNames calls every method of every repository interface through its decorator
// and checks it reports "<prefix>.<method in snake case>": the op vocabulary follows from the
// interfaces, so it is the same on every backend, and a method added to an interface without
// its decorator method does not compile (or, named wrongly, fails here).
func TestObservedOpNames(t *testing.T) {
	var calls []call
	tm := recorder(&calls)
	for _, tc := range []struct {
		prefix  string
		iface   reflect.Type
		wrapped any
	}{
		{"orders", reflect.TypeFor[order.Repository](), observedOrders{nilOrders{}, tm}},
		{"products", reflect.TypeFor[catalog.Repository](), observedProducts{nilProducts{}, tm}},
		{"outbox", reflect.TypeFor[outbox.Log](), observeOutbox(nilOutbox{}, tm)},
		{"users", reflect.TypeFor[account.Repository](), observedUsers{nilUsers{}, tm}},
		{"carts", reflect.TypeFor[cart.Repository](), observedCarts{nilCarts{}, tm}},
		{"sessions", reflect.TypeFor[session.Repository](), observedSessions{nilSessions{}, tm}},
		{"events", reflect.TypeFor[event.Repository](), observedEvents{nilEvents{}, tm}},
		{"history", reflect.TypeFor[history.Repository](), observedHistory{nilHistory{}, tm}},
		{"catalog", reflect.TypeFor[CatalogReader](), observedCatalog{nilCatalog{}, tm}},
		{"catalog", reflect.TypeFor[projection.CatalogSink](), observedCatalogSink{nilSink{}, tm}},
	} {
		v := reflect.ValueOf(tc.wrapped)
		if !v.Type().Implements(tc.iface) {
			t.Fatalf("%T does not implement %v", tc.wrapped, tc.iface)
		}
		if v.NumMethod() != tc.iface.NumMethod() {
			t.Errorf("%T has %d methods, %v %d: an extra method would hide an optional interface", tc.wrapped, v.NumMethod(), tc.iface, tc.iface.NumMethod())
		}
		for i := range tc.iface.NumMethod() {
			m := tc.iface.Method(i)
			calls = calls[:0]
			callZero(v.MethodByName(m.Name))
			want := call{"b", tc.prefix + "." + snake(m.Name)}
			if len(calls) != 1 || calls[0] != want {
				t.Errorf("%v.%s reported %v, want [%v]", tc.iface, m.Name, calls, want)
			}
		}
	}
}

// callZero calls fn with a context and zero values, swallowing the nil backend's panic.
func callZero(fn reflect.Value) {
	defer func() { _ = recover() }()
	args := make([]reflect.Value, fn.Type().NumIn())
	for i := range args {
		args[i] = reflect.Zero(fn.Type().In(i))
	}
	args[0] = reflect.ValueOf(context.Background())
	fn.Call(args)
}

// TestObservedOutboxKeepsPartitions: the projector reads a partitioned outbox (MongoDB) through
// outbox.Parts, which must still see the partitions, each timed as the outbox.
func TestObservedOutboxKeepsPartitions(t *testing.T) {
	var calls []call
	tm := recorder(&calls)
	if _, ok := observeOutbox(nilOutbox{}, tm).(outbox.Partitioned); ok {
		t.Error("a plain outbox became Partitioned")
	}
	parts := outbox.Parts(observeOutbox(partitionedOutbox{}, tm))
	if len(parts) != 2 {
		t.Fatalf("parts = %d, want 2", len(parts))
	}
	callZero(reflect.ValueOf(parts[1]).MethodByName("LastSeq"))
	if want := (call{"b", "outbox.last_seq"}); len(calls) != 1 || calls[0] != want {
		t.Errorf("a partition reported %v, want [%v]", calls, want)
	}
}
