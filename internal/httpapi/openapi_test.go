package httpapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: every registered route is documented and every documented
// operation is registered, with the access the document claims.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t)
	var doc struct {
		OpenAPI  string                    `json:"openapi"`
		Security []map[string][]string     `json:"security"`
		Paths    map[string]map[string]any `json:"paths"`
	}
	e.must(t, 200, req{method: "GET", path: "/openapi.json"}).json(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q", doc.OpenAPI)
	}
	registered := map[string]route{}
	for _, rt := range routes {
		registered[rt.pattern()] = rt
	}
	var documented []string
	for path, item := range doc.Paths {
		for method, op := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			pattern := strings.ToUpper(method) + " " + path
			documented = append(documented, pattern)
			rt, ok := registered[pattern]
			if !ok {
				t.Errorf("documented but not registered: %s", pattern)
				continue
			}
			raw, _ := json.Marshal(op)
			var o struct {
				Security *[]map[string][]string `json:"security"`
			}
			_ = json.Unmarshal(raw, &o)
			sec := doc.Security
			if o.Security != nil {
				sec = *o.Security
			}
			var schemes []string
			for _, s := range sec {
				for k := range s {
					schemes = append(schemes, k)
				}
			}
			want := map[access][]string{accPublic: nil, accSession: {"session"}, accUser: {"session"}, accAdmin: {"admin"}}[rt.access]
			if !slices.Equal(schemes, want) {
				t.Errorf("%s: documented security %v, route needs %v", pattern, schemes, want)
			}
		}
	}
	for p := range registered {
		if !slices.Contains(documented, p) {
			t.Errorf("registered but not documented: %s", p)
		}
	}
	sort.Strings(documented)
	if len(documented) != len(routes) {
		t.Errorf("%d documented operations, %d routes", len(documented), len(routes))
	}
}

// TestOpenAPIRefsResolve: every $ref points at something in the document.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var cur any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, ok := cur.(map[string]any)
					if !ok || m[part] == nil {
						t.Errorf("unresolved $ref %s", ref)
						return
					}
					cur = m[part]
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}
