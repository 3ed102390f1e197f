// Command observegen writes internal/placement/observe_gen.go: for every repository interface
// a store serves, a decorator whose methods time each call, give it a span in sampled
// requests and read its error (placement's timer), under the op name
// "<family>.<method in snake case>". A new repository method gets its decorator by running
// `go generate ./internal/placement`; TestObserveGenIsCurrent fails until it is run.
//
// Usage: go run ./internal/placement/observegen [-o file] (from the module root; "-" writes
// to standard output).
package main

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/shardmart/shardmart/internal/ifacegen"
)

// decorator is one generated type: the interface it decorates, the family prefix of its op
// names, and the expression its methods call (default r.next).
type decorator struct {
	typ, iface, prefix string
	// next, when set, is how a method reaches the decorated value (a type assertion), and the
	// type is declared by hand (it embeds another decorator).
	next string
	// ops overrides the op name of a method.
	ops map[string]string
}

var decorators = []decorator{
	{typ: "observedOrders", iface: "internal/order.Repository", prefix: "orders"},
	{typ: "observedProducts", iface: "internal/catalog.Repository", prefix: "products"},
	// The projector's reads of the store of record, not a replica: named apart from the
	// product page's reads.
	{typ: "observedSource", iface: "internal/projection.ProductSource", prefix: "products", ops: map[string]string{"GetProduct": "current_product"}},
	{typ: "observedOutbox", iface: "internal/outbox.Log", prefix: "outbox"},
	{typ: "observedLeasedOutbox", iface: "internal/outbox.Leaser", prefix: "outbox", next: "r.next.(outbox.Leaser)"},
	{typ: "observedUsers", iface: "internal/account.Repository", prefix: "users"},
	{typ: "observedCarts", iface: "internal/cart.Repository", prefix: "carts"},
	{typ: "observedSessions", iface: "internal/session.Repository", prefix: "sessions"},
	{typ: "observedEvents", iface: "internal/event.Repository", prefix: "events"},
	{typ: "observedHistory", iface: "internal/history.Repository", prefix: "history"},
	{typ: "observedCatalog", iface: "internal/catalog.Reader", prefix: "catalog"},
	{typ: "observedCatalogSink", iface: "internal/projection.CatalogSink", prefix: "catalog"},
}

func main() { ifacegen.Main("observegen", "internal/placement/observe_gen.go", Generate) }

// Generate returns the formatted source of observe_gen.go.
func Generate() ([]byte, error) {
	ifaces, err := ifacegen.Load(decorators, func(d decorator) string { return d.iface })
	if err != nil {
		return nil, err
	}
	f := ifacegen.NewFile("context", "time")
	for i, d := range decorators {
		decorate(f, d, ifaces[i])
	}
	return f.Source("observegen", "placement")
}

func decorate(f *ifacegen.File, d decorator, iface ifacegen.Interface) {
	next := d.next
	if next == "" {
		next = "r.next"
		f.Printf("type %s struct {\n\tnext %s\n\tt    timer\n}\n\n", d.typ, f.Type(iface.Type))
	}
	for _, m := range iface.Methods {
		method(f, d, next, m)
	}
}

func method(f *ifacegen.File, d decorator, next string, m ifacegen.Method) {
	params, args := f.Params(m.Sig, "r", "sp", "err")
	call := fmt.Sprintf("%s.%s(%s)", next, m.Name, strings.Join(args, ", "))
	results := f.Results(m.Sig)
	if !ifacegen.TakesContextReturnsError(m.Sig) {
		f.Printf("func (r %s) %s(%s) %s {\n\treturn %s\n}\n\n", d.typ, m.Name, strings.Join(params, ", "), ifacegen.ResultList(results), call)
		return
	}
	for i := range results[:len(results)-1] {
		results[i] = fmt.Sprintf("out%d %s", i, results[i])
	}
	results[len(results)-1] = "err error"
	op := d.ops[m.Name]
	if op == "" {
		op = snake(m.Name)
	}
	op = d.prefix + "." + op
	ctx := args[0]
	f.Printf("func (r %s) %s(%s) (%s) {\n", d.typ, m.Name, strings.Join(params, ", "), strings.Join(results, ", "))
	f.Printf("\t%s, sp := r.t.span(%s, %q)\n", ctx, ctx, op)
	f.Printf("\tdefer r.t.done(%s, %q, time.Now(), &err, sp)\n", ctx, op)
	f.Printf("\treturn %s\n}\n\n", call)
}

// snake turns a Go method name into the op's snake case: ByIdempotencyKey -> by_idempotency_key.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
