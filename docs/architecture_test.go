package docs

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shardmart/shardmart/"

// domain are the packages of the domain and application layer: entities, rules, use cases
// and the repository interfaces the backends implement. They import each other and the
// standard library, never an adapter, a driver or the process around them.
var domain = []string{
	"internal/money", "internal/validation", "internal/paging", "internal/catalog", "internal/order",
	"internal/cart", "internal/session", "internal/event", "internal/account", "internal/history",
	"internal/outbox", "internal/projection", "internal/ratelimit", "internal/family", "internal/store",
	"internal/tracing",
}

// drivers are the database clients; only adapters, the tools that drive a database, the
// composition root and the command line may link them.
var drivers = []string{"github.com/apache/cassandra-gocql-driver", "go.mongodb.org/mongo-driver", "github.com/mattn/go-sqlite3"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

// The layer rule of architecture.md, "Layers": each package may import only what its layer
// allows. A new import that breaks it fails here.
func TestLayerRule(t *testing.T) {
	pkgs := listPackages(t, "../...")
	for name, p := range pkgs {
		for _, imp := range p.Imports {
			if why := forbidden(name, imp); why != "" {
				t.Errorf("%s imports %s: %s", name, imp, why)
			}
		}
	}
}

func forbidden(from, imp string) string {
	internal, own := strings.CutPrefix(imp, module)
	switch {
	case slices.Contains(domain, from) && own && !slices.Contains(domain, internal):
		return "the domain layer imports only domain packages"
	case slices.Contains(domain, from) && isDriver(imp):
		return "the domain layer links no database driver"
	case own && internal == "internal/cli" && from != "cmd/shardmart":
		return "only the binary's main imports the command line"
	case isAdapter(from) && own && (internal == "internal/shop" || internal == "internal/httpapi"):
		return "an adapter knows nothing of the composition root or the HTTP layer"
	case from == "internal/httpapi" && own && (strings.HasPrefix(internal, "internal/store/") || internal == "internal/placement" || internal == "internal/shop"):
		return "the HTTP layer calls services through its own interfaces, never a backend"
	}
	return ""
}

// isAdapter is a package that persists the domain: a store backend, the placement that
// chooses them, the migration engine that copies between them, or the dual-write layer.
func isAdapter(p string) bool {
	return strings.HasPrefix(p, "internal/store/") || p == "internal/placement" || p == "internal/migrate" || p == "internal/dualwrite"
}

func isDriver(imp string) bool {
	for _, d := range drivers {
		if strings.HasPrefix(imp, d) {
			return true
		}
	}
	return false
}

// The HTTP layer compiles without any database driver, and the shardmart binary does not
// link package testing.
func TestDependencySets(t *testing.T) {
	pkgs := listPackages(t, "../internal/httpapi", "../cmd/shardmart")
	for _, dep := range pkgs["internal/httpapi"].Deps {
		if isDriver(dep) {
			t.Errorf("internal/httpapi depends on the database driver %s", dep)
		}
	}
	if slices.Contains(pkgs["cmd/shardmart"].Deps, "testing") {
		t.Error("cmd/shardmart links package testing: test helpers must not be reachable from the binary")
	}
}
