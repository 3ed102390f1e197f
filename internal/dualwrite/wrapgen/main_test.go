package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/ifacegen"
)

// sessionRepo type-checks a session package whose Repository declares methods.
func sessionRepo(t *testing.T, methods string) ifacegen.Interface {
	t.Helper()
	src := "package session\n\nimport (\n\t\"context\"\n\t\"time\"\n)\n\ntype Session struct{ ID string }\n\nvar (\n\t_ time.Time\n\t_ context.Context\n)\n\ntype Repository interface {\n" + methods + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "session.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check(ifacegen.Module+"internal/session", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ifacegen.Lookup(pkg, []*ast.File{f}, "Repository")
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var sessions = []wrapper{{typ: "dualWriteSessions", iface: "internal/session.Repository", write: sessionWrite}}

// The generator refuses a method it cannot classify, naming it and what to do, and a write
// whose copy its signature does not name.
func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct{ name, methods, want string }{
		{"no directive", "\t// Extend moves the expiry.\n\tExtend(ctx context.Context, id string, until time.Time) error\n",
			"internal/session.Repository.Extend: no //dualwrite: directive"},
		{"unknown directive", "\t//dualwrite:mirror\n\tExtend(ctx context.Context, id string, until time.Time) error\n",
			"internal/session.Repository.Extend: unknown directive //dualwrite:mirror"},
		{"write without a key", "\t//dualwrite:write\n\tExtendAll(ctx context.Context, until time.Time) error\n",
			"internal/session.Repository.ExtendAll: a session write names the session it changes"},
		{"no context", "\t//dualwrite:read\n\tCount() (int, error)\n",
			"internal/session.Repository.Count: a wrapped method takes a context.Context first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := generate(sessions, []ifacegen.Interface{sessionRepo(t, tc.methods)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("generate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A method marked as a write, a read, unmirrored or custom gets the body its directive says,
// with no other change: adding a method is its directive and `go generate`.
func TestGenerateFollowsDirectives(t *testing.T) {
	src, err := generate(sessions, []ifacegen.Interface{sessionRepo(t, `	//dualwrite:write
	Extend(ctx context.Context, id string, until time.Time) (Session, error)
	//dualwrite:write
	Create(ctx context.Context, s Session) error
	//dualwrite:read
	Get(ctx context.Context, id string) (Session, error)
	//dualwrite:unmirrored
	Purge(ctx context.Context, now time.Time) (int, error)
	//dualwrite:custom
	Special(ctx context.Context, id string) error
`)})
	if err != nil {
		t.Fatal(err)
	}
	got := string(src)
	for _, want := range []string{
		"out0, err := r.Extend(ctx, id, until)\n\td.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error {\n\t\t_, err := o.Extend(ctx, id, until)\n\t\treturn err\n\t})\n\treturn out0, err",
		"err := r.Create(ctx, s)\n\td.after(ctx, p, s.ID, err,",
		"func (d *dualWriteSessions) Get(ctx context.Context, id string) (session.Session, error) {\n\t// Served from the store serving the family.\n\tr, _, done := d.pick()",
		"func (d *dualWriteSessions) Purge(ctx context.Context, now time.Time) (int, error) {\n\t// Where the family is served only",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("generated source lacks\n%s\n---- got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Special") {
		t.Errorf("a custom method was generated:\n%s", got)
	}
}

// An entry naming its family and accessor gets the family's wiring generated: its accessor in
// newStores, its case in repoWrapper and, when it reads keys back, its readsKeysBack entry;
// one naming only one of them is refused.
func TestGenerateWiresFamilies(t *testing.T) {
	repo := sessionRepo(t, "\t//dualwrite:read\n\tGet(ctx context.Context, id string) (Session, error)\n")
	w := wrapper{typ: "dualWriteSessions", iface: "internal/session.Repository", family: "Sessions", accessor: "Sessions", readsKeysBack: true, write: sessionWrite}
	src, err := generate([]wrapper{w}, []ifacegen.Interface{repo})
	if err != nil {
		t.Fatal(err)
	}
	got := string(src)
	for _, want := range []string{
		"type newStores interface {\n\tSessions() session.Repository\n}",
		"case family.Sessions:\n\t\treturn func(s *placement.Stores, neu S, m *Layer, ph *familyPhase) {\n\t\t\ts.Sessions = &dualWriteSessions{pair[session.Repository]{old: s.Sessions, neu: neu.Sessions(), m: m, ph: ph}}",
		"var readsKeysBack = map[family.Name]bool{\n\tfamily.Sessions: true,\n}",
		`"github.com/shardmart/shardmart/internal/placement"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("generated source lacks\n%s\n---- got:\n%s", want, got)
		}
	}

	w.readsKeysBack = false
	if src, err = generate([]wrapper{w}, []ifacegen.Interface{repo}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(src), "family.Sessions: true") {
		t.Errorf("a family that does not read keys back is in readsKeysBack:\n%s", src)
	}

	w.accessor = ""
	if _, err := generate([]wrapper{w}, []ifacegen.Interface{repo}); err == nil || !strings.Contains(err.Error(), "names both its family and its accessor") {
		t.Fatalf("generate with a family and no accessor: %v, want a refusal", err)
	}
}
