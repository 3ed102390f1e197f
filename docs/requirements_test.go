// Package docs holds the checks that keep the documentation true to the code.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// catalog is the requirement catalog of the product brief: a new ID must be added here and
// mapped in requirements.md.
var catalog = []string{
	"ORD-1", "ORD-2", "ORD-3", "PRD-1", "PRD-2", "PRD-3", "PRD-4", "PRD-5",
	"CRT-1", "CRT-2", "CRT-3", "CRT-4", "CRT-5", "CRT-6", "SES-1", "EVT-1", "HIS-1", "CAT-1", "CAT-2",
	"SHD-1", "SHD-2", "SHD-3", "SHD-4", "SHD-5", "SHD-6", "SHD-7", "MON-1", "RPL-1", "CAS-1", "MIG-1",
}

var (
	rowID      = regexp.MustCompile(`^\| ([A-Z]{3}-\d+) \|`)
	backticked = regexp.MustCompile("`([^`]+)`")
	quoted     = regexp.MustCompile(`"([^"]+)"`)
	testFunc   = regexp.MustCompile(`(?m)((?:^//.*\n)*)^func (Test\w+)\(`)
	subtest    = regexp.MustCompile(`t\.Run\("([^"]+)"`)
	routeRow   = regexp.MustCompile(`\{"([A-Z]+)", "([^"]+)"`)
)

// sources indexes the repository's tests: package dir -> test function -> its doc comment
// (Go test names cannot hold "ORD-1", so a top-level test carries its IDs there), and every
// subtest name.
func sources(t *testing.T, root string) (funcs map[string]map[string]string, subtests map[string]bool) {
	funcs, subtests = map[string]map[string]string{}, map[string]bool{}
	walkGo(t, root, func(path string, b []byte) {
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			if funcs[dir] == nil {
				funcs[dir] = map[string]string{}
			}
			funcs[dir][string(m[2])] = string(m[1])
		}
		for _, m := range subtest.FindAllSubmatch(b, -1) {
			subtests[string(m[1])] = true
		}
	})
	return funcs, subtests
}

// walkGo calls fn with the path and contents of every Go file under root.
func walkGo(t *testing.T, root string, fn func(path string, b []byte)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRequirementsMapIsComplete(t *testing.T) {
	root := ".."
	doc, err := os.ReadFile("requirements.md")
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(root, "internal/httpapi/api.go"))
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, m := range routeRow.FindAllSubmatch(api, -1) {
		routes[string(m[1])+" "+string(m[2])] = true
	}
	funcs, subtests := sources(t, root)

	rows := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		m := rowID.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id := m[1]
		if rows[id] {
			t.Errorf("%s: two rows", id)
		}
		rows[id] = true
		cells := strings.Split(line, "|")
		if len(cells) != 8 {
			t.Errorf("%s: %d columns, want 6", id, len(cells)-2)
			continue
		}
		rule, backends, tests, reached := cells[3], cells[4], cells[5], cells[6]
		if strings.Contains(rule, "not built") {
			continue
		}
		for _, cell := range []string{rule, backends} {
			for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
				if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
					t.Errorf("%s names %s: %v", id, m[1], err)
				}
			}
		}
		carried := false
		for _, m := range quoted.FindAllStringSubmatch(tests, -1) {
			if !subtests[m[1]] {
				t.Errorf("%s names subtest %q, which no test runs", id, m[1])
			}
			carried = carried || strings.Contains(m[1], id)
		}
		for _, m := range backticked.FindAllStringSubmatch(tests, -1) {
			pkg, name, ok := strings.Cut(m[1], ".Test")
			doc, exists := funcs[pkg]["Test"+name]
			if !ok || !exists {
				t.Errorf("%s names test %s, which does not exist", id, m[1])
			}
			carried = carried || strings.Contains(doc, id)
		}
		if tests == " — " {
			t.Errorf("%s: built but no test named", id)
		}
		if !carried {
			t.Errorf("%s: none of its tests carries the ID (in a subtest name, or a test function's doc comment)", id)
		}
		for _, m := range backticked.FindAllStringSubmatch(reached, -1) {
			if r := m[1]; strings.Contains(r, " /") && !routes[r] {
				t.Errorf("%s names route %s, which is not in the route table", id, r)
			}
		}
	}
	for _, id := range catalog {
		if !rows[id] {
			t.Errorf("%s has no row in requirements.md", id)
		}
	}
}

// requirementID is an ID of the catalog's shape, as code and test names cite them.
var requirementID = regexp.MustCompile(`\b(ORD|PRD|CRT|SES|EVT|HIS|CAT|SHD|MON|RPL|CAS|MIG)-\d+\b`)

// Every requirement ID the code or its tests cite is one of the catalog's, so each is mapped in
// requirements.md (TestRequirementsMapIsComplete holds the map).
func TestCitedRequirementsAreInTheCatalog(t *testing.T) {
	known := map[string]bool{}
	for _, id := range catalog {
		known[id] = true
	}
	walkGo(t, "..", func(path string, b []byte) {
		for _, id := range requirementID.FindAll(b, -1) {
			if !known[string(id)] {
				t.Errorf("%s cites %s, which the requirement catalog does not hold", path, id)
			}
		}
	})
}
