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
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"go/types"
	"os"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/tools/go/packages"
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

const module = "github.com/shardmart/shardmart/"

func main() {
	out := flag.String("o", "internal/placement/observe_gen.go", "file to write (- for standard output)")
	flag.Parse()
	src, err := Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "observegen:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(src)
	} else {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "observegen:", err)
		os.Exit(1)
	}
}

// Generate returns the formatted source of observe_gen.go.
func Generate() ([]byte, error) {
	paths := map[string]bool{}
	for _, d := range decorators {
		pkg, _, _ := strings.Cut(d.iface, ".")
		paths[module+pkg] = true
	}
	var patterns []string
	for p := range paths {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns)
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedTypes | packages.NeedName | packages.NeedImports}, patterns...)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*types.Package{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("load %s: %v", p.PkgPath, p.Errors[0])
		}
		byPath[p.PkgPath] = p.Types
	}
	g := &gen{imports: map[string]string{"context": "context", "time": "time"}}
	for _, d := range decorators {
		path, name, _ := strings.Cut(d.iface, ".")
		pkg := byPath[module+path]
		obj := pkg.Scope().Lookup(name)
		if obj == nil {
			return nil, fmt.Errorf("%s not found", d.iface)
		}
		iface, ok := obj.Type().Underlying().(*types.Interface)
		if !ok {
			return nil, fmt.Errorf("%s is not an interface", d.iface)
		}
		if err := g.decorator(d, obj.Type(), iface); err != nil {
			return nil, err
		}
	}
	return g.source()
}

type gen struct {
	body    bytes.Buffer
	imports map[string]string // path -> name
}

func (g *gen) qualifier(p *types.Package) string {
	g.imports[p.Path()] = p.Name()
	return p.Name()
}

func (g *gen) decorator(d decorator, named types.Type, iface *types.Interface) error {
	next := d.next
	if next == "" {
		next = "r.next"
		fmt.Fprintf(&g.body, "type %s struct {\n\tnext %s\n\tt    timer\n}\n\n", d.typ, types.TypeString(named, g.qualifier))
	}
	for i := range iface.NumMethods() {
		m := iface.Method(i)
		if err := g.method(d, next, m); err != nil {
			return fmt.Errorf("%s.%s: %w", d.iface, m.Name(), err)
		}
	}
	return nil
}

func (g *gen) method(d decorator, next string, m *types.Func) error {
	sig := m.Type().(*types.Signature)
	params, args := g.params(sig)
	res := sig.Results()
	timed := sig.Params().Len() > 0 && types.TypeString(sig.Params().At(0).Type(), nil) == "context.Context" &&
		res.Len() > 0 && types.TypeString(res.At(res.Len()-1).Type(), nil) == "error"
	call := fmt.Sprintf("%s.%s(%s)", next, m.Name(), strings.Join(args, ", "))
	if !timed {
		var results []string
		for i := range res.Len() {
			results = append(results, types.TypeString(res.At(i).Type(), g.qualifier))
		}
		fmt.Fprintf(&g.body, "func (r %s) %s(%s) %s {\n\treturn %s\n}\n\n", d.typ, m.Name(), strings.Join(params, ", "), resultList(results), call)
		return nil
	}
	var results []string
	for i := range res.Len() - 1 {
		results = append(results, fmt.Sprintf("out%d %s", i, types.TypeString(res.At(i).Type(), g.qualifier)))
	}
	results = append(results, "err error")
	op := d.ops[m.Name()]
	if op == "" {
		op = snake(m.Name())
	}
	op = d.prefix + "." + op
	ctx := args[0]
	fmt.Fprintf(&g.body, "func (r %s) %s(%s) (%s) {\n", d.typ, m.Name(), strings.Join(params, ", "), strings.Join(results, ", "))
	fmt.Fprintf(&g.body, "\t%s, sp := r.t.span(%s, %q)\n", ctx, ctx, op)
	fmt.Fprintf(&g.body, "\tdefer r.t.done(%s, %q, time.Now(), &err, sp)\n", ctx, op)
	fmt.Fprintf(&g.body, "\treturn %s\n}\n\n", call)
	return nil
}

// params renders a signature's parameters with their declared names (p<i> where unnamed),
// and the arguments that pass them on.
func (g *gen) params(sig *types.Signature) (params, args []string) {
	ps := sig.Params()
	for i := range ps.Len() {
		v := ps.At(i)
		name := v.Name()
		if name == "" || name == "_" || name == "r" || name == "sp" || name == "err" || strings.HasPrefix(name, "out") {
			name = fmt.Sprintf("p%d", i)
		}
		t := types.TypeString(v.Type(), g.qualifier)
		arg := name
		if sig.Variadic() && i == ps.Len()-1 {
			t = "..." + strings.TrimPrefix(t, "[]")
			arg += "..."
		}
		params = append(params, name+" "+t)
		args = append(args, arg)
	}
	return params, args
}

func resultList(rs []string) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return rs[0]
	}
	return "(" + strings.Join(rs, ", ") + ")"
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

func (g *gen) source() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by observegen; DO NOT EDIT.\n\npackage placement\n\nimport (\n")
	paths := make([]string, 0, len(g.imports))
	for p := range g.imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !strings.Contains(p, ".") {
			fmt.Fprintf(&b, "\t%q\n", p)
		}
	}
	b.WriteString("\n")
	for _, p := range paths {
		if strings.Contains(p, ".") {
			fmt.Fprintf(&b, "\t%q\n", p)
		}
	}
	b.WriteString(")\n\n")
	b.Write(g.body.Bytes())
	return format.Source(b.Bytes())
}
