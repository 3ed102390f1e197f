// Command wrapgen writes internal/dualwrite/wrap_gen.go: for every repository interface the
// dual-write layer wraps, a type over the family's pair of stores (pair[R]) with one method
// per interface method. How a method is dual-written is said where the method is declared, by
// a directive comment, the last line of its doc comment in the domain package:
//
//   - //dualwrite:read         served from the store serving the family (the phase's source);
//   - //dualwrite:write        applied to the store serving the family, then to the other one
//     by the family's rule (its write below: a mirror of the changed keys under the phase, or
//     the same record written after the phase is released), through the hooks the family's
//     file in internal/dualwrite declares;
//   - //dualwrite:unmirrored   a change made where the family is served only (the purge of
//     expired rows);
//   - //dualwrite:custom       written by hand in internal/dualwrite (a write whose copy the
//     rule cannot derive from its signature).
//
// For a family's repository (an entry naming its family and accessor) it also writes the
// family's wiring: its accessor in newStores (what a new store, Cassandra or MongoDB, hands
// the layer), its case in repoWrapper, and, when its hooks copy by reading the changed keys
// back from the old store, its entry in readsKeysBack (the layer then gives it a mirror of the
// old store). A new family's dual-write wiring is its entry below and its hooks.
//
// A method without a directive, or a write whose keys its signature does not name, stops the
// generator with an error naming it. A new method is wrapped by running
// `go generate ./internal/dualwrite`; TestWrapGenIsCurrent fails until it is run.
//
// Usage: go run ./internal/dualwrite/wrapgen [-o file] (from the module root; "-" writes to
// standard output).
package main

import (
	"fmt"
	"go/types"
	"strings"

	"github.com/shardmart/shardmart/internal/ifacegen"
)

// wrapper is one generated type: the interface it wraps and how its writes are copied.
type wrapper struct {
	typ, iface string
	// family is the family's constant in internal/family ("Sessions") and accessor the
	// placement.Stores field and the new stores' method holding its repository ("Sessions"):
	// with them the family's wiring is generated. Both empty: the type is wired by hand.
	family, accessor string
	// readsKeysBack: the family's hooks copy a change by reading its keys back from the old
	// store (Layer.mirror, Layer.carts), so the layer gives them a mirror of that store.
	readsKeysBack bool
	// write renders a write's body from its call (nil: the interface has no writes).
	write func(c call) (string, error)
}

var wrappers = []wrapper{
	{typ: "dualWriteSessions", iface: "internal/session.Repository", family: "Sessions", accessor: "Sessions", readsKeysBack: true, write: sessionWrite},
	{typ: "dualWriteCarts", iface: "internal/cart.Repository", family: "Carts", accessor: "Carts", readsKeysBack: true, write: cartWrite},
	{typ: "dualWriteEvents", iface: "internal/event.Repository", family: "Events", accessor: "Events", readsKeysBack: true, write: recordWrite("internal/event.Event", "ID")},
	{typ: "dualWriteHistory", iface: "internal/history.Repository", family: "History", accessor: "History", write: recordWrite("internal/history.Entry", "OrderID")},
	// The catalog is wired by hand (internal/dualwrite's wrappers): it also sets the sink.
	{typ: "dualWriteCatalog", iface: "internal/catalog.Reader"},
}

// reserved are the names the generated bodies use; a parameter so named is renamed.
var reserved = []string{"d", "r", "p", "done", "err", "o"}

func main() { ifacegen.Main("wrapgen", "internal/dualwrite/wrap_gen.go", Generate) }

// Generate returns the formatted source of wrap_gen.go.
func Generate() ([]byte, error) {
	ifaces, err := ifacegen.Load(wrappers, func(w wrapper) string { return w.iface })
	if err != nil {
		return nil, err
	}
	return generate(wrappers, ifaces)
}

func generate(ws []wrapper, ifaces []ifacegen.Interface) ([]byte, error) {
	var wiringImports []string
	for _, w := range ws {
		if w.family != "" {
			// What the generated wiring refers to.
			wiringImports = []string{ifacegen.Module + "internal/family", ifacegen.Module + "internal/placement"}
		}
	}
	f := ifacegen.NewFile(wiringImports...)
	for i, w := range ws {
		if (w.family == "") != (w.accessor == "") || (w.readsKeysBack && w.family == "") {
			return nil, fmt.Errorf("%s: a wrapper names both its family and its accessor (and reads keys back only then), or neither and is wired by hand", w.typ)
		}
		t := f.Type(ifaces[i].Type)
		f.Printf("// %s is %s under the dual-write layer.\ntype %s struct{ pair[%s] }\n\n", w.typ, t, w.typ, t)
		for _, m := range ifaces[i].Methods {
			if err := method(f, w, ifaces[i], m); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", w.iface, m.Name, err)
			}
		}
	}
	wiring(f, ws, ifaces)
	return f.Source("wrapgen", "dualwrite")
}

// wiring renders what puts the families' repositories under the layer: newStores,
// repoWrapper and readsKeysBack, from the wrappers that name their family.
func wiring(f *ifacegen.File, ws []wrapper, ifaces []ifacegen.Interface) {
	var stores, cases, readBack strings.Builder
	for i, w := range ws {
		if w.family == "" {
			continue
		}
		t := f.Type(ifaces[i].Type)
		fmt.Fprintf(&stores, "\t%s() %s\n", w.accessor, t)
		fmt.Fprintf(&cases, "\tcase family.%s:\n\t\treturn func(s *placement.Stores, neu S, m *Layer, ph *familyPhase) {\n\t\t\ts.%s = &%s{pair[%s]{old: s.%s, neu: neu.%s(), m: m, ph: ph}}\n\t\t}\n",
			w.family, w.accessor, w.typ, t, w.accessor, w.accessor)
		if w.readsKeysBack {
			fmt.Fprintf(&readBack, "\tfamily.%s: true,\n", w.family)
		}
	}
	if cases.Len() == 0 {
		return
	}
	f.Printf(`// newStores is what a new store (Cassandra or MongoDB) hands the dual-write wrappers: the
// repositories of the families both take with dual writes.
type newStores interface {
%s}

// repoWrapper puts family f's repository under the layer, its new side from the new store;
// nil for a family without a generated wrapper.
func repoWrapper[S newStores](f family.Name) wrapFunc[S] {
	switch f {
%s	}
	return nil
}

// readsKeysBack are the families whose hooks copy a change by reading its keys back from the
// old store.
var readsKeysBack = map[family.Name]bool{
%s}
`, stores.String(), cases.String(), readBack.String())
}

// call is one method as a generated body sees it.
type call struct {
	m       ifacegen.Method
	iface   string // the interface's type, as the file refers to it
	params  []string
	args    []string
	results []string // "out<i>" for each result but the error
}

func (c call) invoke(recv string) string {
	return fmt.Sprintf("%s.%s(%s)", recv, c.m.Name, strings.Join(c.args, ", "))
}

// param is the argument of the first parameter whose type is typ ("internal/cart.Owner")
// and, when name is set, whose name is name.
func (c call) param(typ, name string) (string, bool) {
	for i := range c.m.Sig.Params().Len() {
		v := c.m.Sig.Params().At(i)
		if types.TypeString(v.Type(), nil) == typeString(typ) && (name == "" || v.Name() == name) {
			return c.args[i], true
		}
	}
	return "", false
}

// result is the variable holding the first result of type typ.
func (c call) result(typ string) (string, bool) {
	for i, r := range c.results {
		if types.TypeString(c.m.Sig.Results().At(i).Type(), nil) == typeString(typ) {
			return r, true
		}
	}
	return "", false
}

func typeString(typ string) string {
	if strings.Contains(typ, ".") && strings.HasPrefix(typ, "internal/") {
		return ifacegen.Module + typ
	}
	return typ
}

const directives = "//dualwrite:read, //dualwrite:write, //dualwrite:unmirrored or //dualwrite:custom"

func method(f *ifacegen.File, w wrapper, iface ifacegen.Interface, m ifacegen.Method) error {
	kind, ok := m.Directive("dualwrite")
	if !ok {
		return fmt.Errorf("no //dualwrite: directive: end its doc comment with one of %s, to say how the dual-write layer treats it", directives)
	}
	if kind == "custom" {
		return nil
	}
	if !ifacegen.TakesContextReturnsError(m.Sig) {
		return fmt.Errorf("a wrapped method takes a context.Context first and returns an error last")
	}
	c := call{m: m, iface: f.Type(iface.Type)}
	c.params, c.args = f.Params(m.Sig, reserved...)
	results := f.Results(m.Sig)
	for i := range len(results) - 1 {
		c.results = append(c.results, fmt.Sprintf("out%d", i))
	}
	var body string
	switch kind {
	case "read":
		body = fmt.Sprintf("\t// Served from the store serving the family.\n\tr, _, done := d.pick()\n\tdefer done()\n\treturn %s\n", c.invoke("r"))
	case "unmirrored":
		body = fmt.Sprintf("\t// Where the family is served only: the other store is left as it is.\n\tr, _, done := d.pick()\n\tdefer done()\n\treturn %s\n", c.invoke("r"))
	case "write":
		if w.write == nil {
			return fmt.Errorf("the dual-write layer copies no write of %s: give the wrapper a write rule in wrapgen, or mark it //dualwrite:custom", w.iface)
		}
		var err error
		if body, err = w.write(c); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown directive //dualwrite:%s: want one of %s", kind, directives)
	}
	f.Printf("func (d *%s) %s(%s) %s {\n%s}\n\n", w.typ, m.Name, strings.Join(c.params, ", "), ifacegen.ResultList(results), body)
	return nil
}

// underPhase renders a write made under the phase, followed by after (which sees p, err and
// the results) before it returns.
func underPhase(c call, after string) string {
	outs := strings.Join(append(append([]string{}, c.results...), "err"), ", ")
	return fmt.Sprintf("\tr, p, done := d.pick()\n\tdefer done()\n\t%s := %s\n\t%s\n\treturn %s\n", outs, c.invoke("r"), after, outs)
}

// sessionWrite: a session change is mirrored by its id (a parameter id, or the session
// written), under the phase; after cutover the hook replays it on the old store.
func sessionWrite(c call) (string, error) {
	key, ok := c.param("string", "id")
	if !ok {
		if s, ok := c.param("internal/session.Session", ""); ok {
			key = s + ".ID"
		} else {
			return "", fmt.Errorf("a session write names the session it changes: a string parameter id, or a session.Session")
		}
	}
	replay := "return " + c.invoke("o")
	if len(c.results) > 0 {
		replay = fmt.Sprintf("_, err := %s\n\t\treturn err", c.invoke("o"))
	}
	ctx := c.args[0]
	return underPhase(c, fmt.Sprintf("d.after(%s, p, %s, err, func(%s context.Context, o %s) error {\n\t\t%s\n\t})", ctx, key, ctx, c.iface, replay)), nil
}

// cartWrite: a cart change is mirrored by its owner's carts it touched (a parameter cartID,
// the cart returned), under the phase.
func cartWrite(c call) (string, error) {
	owner, ok := c.param("internal/cart.Owner", "")
	if !ok {
		return "", fmt.Errorf("a cart write takes the cart.Owner whose carts it changes (or is marked //dualwrite:custom)")
	}
	ids := []string{owner}
	if id, ok := c.param("string", "cartID"); ok {
		ids = append(ids, id)
	}
	if out, ok := c.result("internal/cart.Cart"); ok {
		ids = append(ids, out+".ID")
	}
	if len(ids) == 1 {
		return "", fmt.Errorf("a cart write names the carts it changes: a string parameter cartID, or the cart.Cart it returns (or is marked //dualwrite:custom)")
	}
	return underPhase(c, fmt.Sprintf("d.mirror(%s, p, %s)", c.args[0], strings.Join(ids, ", "))), nil
}

// recordWrite: a record written whole (typ, keyed by its field key) is written to the store
// serving the family, then, after the phase is released, to the other, through the family's
// record hook.
func recordWrite(typ, key string) func(call) (string, error) {
	return func(c call) (string, error) {
		rec, ok := c.param(typ, "")
		if !ok || len(c.results) > 0 {
			return "", fmt.Errorf("a record write takes the %s it writes and returns only an error (or is marked //dualwrite:custom)", typ)
		}
		ctx := c.args[0]
		return fmt.Sprintf("\treturn d.record(%s, %s.%s, func(%s context.Context, r %s) error { return %s })\n",
			ctx, rec, key, ctx, c.iface, c.invoke("r")), nil
	}
}
