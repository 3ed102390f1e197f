package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/money"
)

// TestOpenAPIConformance is the property test behind the document's promise. It reads the
// served /openapi.json and, for every operation, sends
//
//   - schema-valid requests: bodies, path, query and header parameters generated from the
//     document's schemas (integers spelt every way JSON allows: 63, 63.0, 630e-1). The status
//     must be documented for the operation and below 500, the body must validate against the
//     documented schema of that status and media type, and a 400 may only name fields the
//     operation lists in x-business-rules;
//   - schema-violating requests, one mutation at a time (wrong type, null, out of range, too
//     long, too short, off-pattern, off-enum, the excluded value, a missing required member or
//     parameter, an unknown member, a bad map key, too many members), each confirmed to violate
//     the schema by a JSON Schema 2020-12 validator: the answer must be a documented 4xx
//     problem naming the mutated field.
//
// It runs on the embedded SQLite store with a fixed seed and a fixed number of checks per
// operation; rapid prints the seed and the drawn values of a failure, and -rapid.seed and
// -rapid.checks override both.
func TestOpenAPIConformance(t *testing.T) {
	rapidDefaults(t, map[string]string{"rapid.checks": "100", "rapid.seed": "20260901", "rapid.nofailfile": "true"})
	e := newEnvWith(t, func(d *Deps) { d.BulkUsers = true })
	doc := loadDoc(t, e.must(t, 200, req{method: "GET", path: "/openapi.json"}).body)
	fx := newFixtures(t, e)
	for _, op := range doc.operations(t) {
		t.Run(op.id, func(t *testing.T) {
			t.Run("valid", func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) {
					c := &conformanceCase{doc: doc, op: op, fx: fx, t: rt}
					c.generate()
					c.creds = len(op.security) == 0 || rapid.IntRange(0, 9).Draw(rt, "send credentials (0: no)") != 0
					c.checkValid(c.send(e))
				})
			})
			if len(op.params) == 0 && op.body == "" {
				return // nothing a client sends can violate this operation's schemas
			}
			t.Run("invalid", func(t *testing.T) {
				rapid.Check(t, func(rt *rapid.T) {
					c := &conformanceCase{doc: doc, op: op, fx: fx, t: rt, creds: true}
					c.generate()
					field := c.mutate()
					c.checkInvalid(c.send(e), field)
				})
			})
		})
	}
}

// rapidDefaults sets rapid's flags for this test unless the command line set them: a fixed
// seed and count keep the run deterministic and bounded.
func rapidDefaults(t *testing.T, defaults map[string]string) {
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range defaults {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("rapid has no flag %s", name)
		}
		if given[name] {
			continue
		}
		old := f.Value.String()
		if err := f.Value.Set(v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
}

// --- the document ---

const docURL = "mem:///openapi.json"

// oasDoc is the served document: raw for reading keywords, compiled schemas for validating.
type oasDoc struct {
	raw      map[string]any
	comp     *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

func loadDoc(t *testing.T, body []byte) *oasDoc {
	d := &oasDoc{compiled: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(body, &d.raw); err != nil {
		t.Fatal(err)
	}
	forSchemas, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// OpenAPI 3.1 schemas are JSON Schema 2020-12, the compiler's default draft. Formats are
	// asserted, as schema-driven fuzzers assert them: the server must refuse a malformed date.
	d.comp = jsonschema.NewCompiler()
	d.comp.AssertFormat()
	if err := d.comp.AddResource(docURL, forSchemas); err != nil {
		t.Fatal(err)
	}
	return d
}

// at returns the value at a JSON pointer ("#/paths/~1v1~1cart/get") of the document.
func (d *oasDoc) at(ptr string) any {
	var cur any = d.raw
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "#/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, _ := strconv.Atoi(tok)
			cur = c[i]
		}
	}
	return cur
}

// deref follows $ref from ptr and returns the object there with its pointer.
func (d *oasDoc) deref(ptr string) (map[string]any, string) {
	for {
		m, _ := d.at(ptr).(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, ptr
		}
		ptr = ref
	}
}

// flat is the schema at ptr with the keywords of its allOf members merged in, for reading
// hints (type, pattern, bounds); validation always uses the whole schema.
func (d *oasDoc) flat(ptr string) map[string]any {
	s, ptr := d.deref(ptr)
	out := map[string]any{}
	all, _ := s["allOf"].([]any)
	for i := range all {
		for k, v := range d.flat(fmt.Sprintf("%s/allOf/%d", ptr, i)) {
			out[k] = v
		}
	}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// validate checks v (a Go value; JSON bytes are parsed first) against the schema at ptr.
func (d *oasDoc) validate(ptr string, v any) error {
	sch, ok := d.compiled[ptr]
	if !ok {
		var err error
		if sch, err = d.comp.Compile(docURL + ptr); err != nil {
			return fmt.Errorf("compile %s: %w", ptr, err)
		}
		d.compiled[ptr] = sch
	}
	raw, ok := v.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

type parameter struct {
	name, in string
	required bool
	schema   string // pointer
}

type operation struct {
	method, path, id string
	params           []parameter
	body             string // pointer of the JSON request body schema; "" when there is none
	security         []string
	rules            map[string]bool   // fields of x-business-rules
	responses        map[string]string // status key ("200", "4XX") -> pointer of the response
}

func escapePtr(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// operations lists every operation of the document in a fixed order.
func (d *oasDoc) operations(t *testing.T) []operation {
	var ops []operation
	paths := d.raw["paths"].(map[string]any)
	for _, path := range sortedKeys(paths) {
		itemPtr := "#/paths/" + escapePtr(path)
		item := paths[path].(map[string]any)
		for _, method := range sortedKeys(item) {
			if method == "parameters" {
				continue
			}
			opPtr := itemPtr + "/" + method
			raw := item[method].(map[string]any)
			op := operation{method: strings.ToUpper(method), path: path, id: raw["operationId"].(string),
				rules: map[string]bool{}, responses: map[string]string{}}
			for _, at := range []string{itemPtr, opPtr} {
				ps, _ := d.at(at + "/parameters").([]any)
				for i := range ps {
					p, ptr := d.deref(fmt.Sprintf("%s/parameters/%d", at, i))
					req, _ := p["required"].(bool)
					op.params = append(op.params, parameter{name: p["name"].(string), in: p["in"].(string), required: req, schema: ptr + "/schema"})
				}
			}
			if _, ok := raw["requestBody"]; ok {
				rb, ptr := d.deref(opPtr + "/requestBody")
				if _, ok := rb["content"].(map[string]any)["application/json"]; !ok {
					t.Fatalf("%s: request body without application/json", op.id)
				}
				op.body = ptr + "/content/application~1json/schema"
			}
			sec, ok := raw["security"].([]any)
			if !ok {
				sec, _ = d.raw["security"].([]any)
			}
			for _, s := range sec {
				op.security = append(op.security, sortedKeys(s.(map[string]any))...)
			}
			rules, _ := raw["x-business-rules"].([]any)
			for _, r := range rules {
				op.rules[r.(map[string]any)["field"].(string)] = true
			}
			for code := range raw["responses"].(map[string]any) {
				_, ptr := d.deref(opPtr + "/responses/" + code)
				op.responses[code] = ptr
			}
			ops = append(ops, op)
		}
	}
	if len(ops) != len(routes) {
		t.Fatalf("the document has %d operations, the route table %d", len(ops), len(routes))
	}
	return ops
}

// --- fixtures: values that exist, so valid requests reach past "not found" ---

type fixtures struct {
	token string              // a logged-in user's session
	known map[string][]string // by parameter or member name: values that exist on the server
}

func newFixtures(t *testing.T, e *env) *fixtures {
	token, _ := e.user(t)
	products := []string{"fx-1", "fx-2", "fx-3"}
	for _, id := range products {
		e.product(t, id, "fx", "9.99", 50)
	}
	e.put(t, token, "fx-1", 1)
	var o orderView
	e.placeOrder(t, token, "fx-order").json(t, &o)
	// At the server's limits, so every answer showing money shows its largest amounts: an
	// order of cart.MaxItems lines of cart.MaxQuantity units at money.Max, then a cart holding
	// such a line. Their totals must still match the documented schemas.
	top := money.Max.String()
	for i := range cart.MaxItems {
		id := fmt.Sprintf("fx-max-%03d", i)
		e.product(t, id, "fxmax", top, cart.MaxQuantity)
		e.put(t, token, id, cart.MaxQuantity)
		products = append(products, id)
	}
	var big struct{ ID string } // an orderView cannot hold the total: money.Amount reads input amounts only
	if r := e.placeOrder(t, token, "fx-order-max"); r.status != http.StatusCreated {
		t.Fatalf("order of the largest cart: %d %s", r.status, r.body)
	} else {
		r.json(t, &big)
	}
	e.put(t, token, "fx-max-000", cart.MaxQuantity) // the order took the stock: the line stays, unavailable to order
	e.put(t, token, "fx-2", 1)
	return &fixtures{token: token, known: map[string][]string{
		"id":         append(slices.Clone(products), o.ID, big.ID),
		"product_id": slices.Clone(products),
		"category":   {"fx", "fxmax"},
		"zone":       {"eu"},
	}}
}

// learn keeps what a 2xx answer shows to exist: a created product's id, a next page's cursor.
func (fx *fixtures) learn(op operation, body []byte) {
	var v struct {
		ID         string `json:"id"`
		NextCursor string `json:"next_cursor"`
	}
	_ = json.Unmarshal(body, &v)
	if op.id == "createProduct" && v.ID != "" {
		fx.known["id"] = append(fx.known["id"], v.ID)
		fx.known["product_id"] = append(fx.known["product_id"], v.ID)
	}
	if v.NextCursor != "" && len(fx.known["cursor"]) < 50 {
		fx.known["cursor"] = append(fx.known["cursor"], v.NextCursor)
	}
}

// --- one request ---

type conformanceCase struct {
	doc    *oasDoc
	op     operation
	fx     *fixtures
	t      *rapid.T
	params map[string]any // by parameter name; absent: not sent
	body   any            // the body's value, nil when the operation takes none
	raw    []byte         // the body as sent
	creds  bool
}

func (c *conformanceCase) generate() {
	c.params = map[string]any{}
	for _, p := range c.op.params {
		if p.required || p.in == "path" || rapid.Bool().Draw(c.t, "send "+p.name) {
			c.params[p.name] = c.value(p.schema, p.name)
		}
	}
	if c.op.body != "" {
		c.body = c.value(c.op.body, "body")
	}
}

// value draws a value valid for the schema at ptr: half the time one the server knows (when
// the schema allows it), else one generated from the schema and checked by the validator.
func (c *conformanceCase) value(ptr, name string) any {
	if vs := c.fx.known[name]; len(vs) > 0 && rapid.Bool().Draw(c.t, "known "+name) {
		if v := rapid.SampledFrom(vs).Draw(c.t, name); c.doc.validate(ptr, v) == nil {
			return v
		}
	}
	for range 50 {
		if v := c.draw(ptr, name); c.doc.validate(ptr, v) == nil {
			return v
		}
	}
	c.t.Fatalf("cannot generate a value valid for %s", ptr)
	return nil
}

func num(v any, or int) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return or
}

func (c *conformanceCase) draw(ptr, name string) any {
	s, ptr := c.doc.deref(ptr)
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok {
		return rapid.SampledFrom(e).Draw(c.t, name)
	}
	if _, ok := s["allOf"]; ok {
		return c.value(ptr+"/allOf/0", name) // value's validation of the whole schema does the rest
	}
	switch s["type"] {
	case "integer":
		return rapid.Int64Range(int64(num(s["minimum"], -1000)), int64(num(s["maximum"], 1000))).Draw(c.t, name)
	case "boolean":
		return rapid.Bool().Draw(c.t, name)
	case "object":
		return c.object(s, ptr, name)
	case "array":
		out := make([]any, rapid.IntRange(num(s["minItems"], 0), min(num(s["maxItems"], 3), 3)).Draw(c.t, name+" items"))
		for i := range out {
			out[i] = c.value(ptr+"/items", name+" item")
		}
		return out
	}
	return c.str(s, name) // "string", or a propertyNames schema that only bounds the length
}

func (c *conformanceCase) str(s map[string]any, name string) string {
	switch {
	case s["pattern"] != nil:
		return rapid.StringMatching(s["pattern"].(string)).Draw(c.t, name)
	case s["format"] == "email":
		return rapid.StringMatching(`^[a-z0-9]{1,20}@[a-z0-9]{1,20}\.[a-z]{2,6}$`).Draw(c.t, name)
	case s["format"] == "date":
		days := rapid.IntRange(0, 200*365).Draw(c.t, name+" (days from 1950)")
		return time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, days).Format(time.DateOnly)
	}
	if n, ok := s["maxLength"].(float64); ok && rapid.IntRange(0, 3).Draw(c.t, name+" at maxLength (0: yes)") == 0 {
		// The longest string allowed, in characters of 1 to 4 bytes: a limit the server
		// counts in bytes, or counts differently, shows here.
		r := rapid.SampledFrom([]rune{'a', 'é', '€', '😀'}).Draw(c.t, name+" rune")
		return strings.Repeat(string(r), int(n))
	}
	return rapid.StringOfN(rapid.Rune(), num(s["minLength"], 0), num(s["maxLength"], 100), -1).Draw(c.t, name)
}

func (c *conformanceCase) object(s map[string]any, ptr, name string) map[string]any {
	out := map[string]any{}
	required := map[string]bool{}
	names, _ := s["required"].([]any)
	for _, r := range names {
		required[r.(string)] = true
	}
	props, _ := s["properties"].(map[string]any)
	for _, k := range sortedKeys(props) {
		if required[k] || rapid.Bool().Draw(c.t, name+" has "+k) {
			out[k] = c.value(ptr+"/properties/"+escapePtr(k), k)
		}
	}
	if _, ok := s["additionalProperties"].(map[string]any); ok {
		n := rapid.IntRange(0, min(num(s["maxProperties"], 3), 3)).Draw(c.t, name+" entries")
		for range n {
			out[c.key(s, ptr, name)] = c.value(ptr+"/additionalProperties", name+" value")
		}
	}
	return out
}

func (c *conformanceCase) key(s map[string]any, ptr, name string) string {
	if _, ok := s["propertyNames"]; ok {
		return c.value(ptr+"/propertyNames", name+" key").(string)
	}
	return rapid.StringN(1, 10, -1).Draw(c.t, name+" key")
}

// encode writes v as JSON, spelling each integer one of the ways JSON allows.
func (c *conformanceCase) encode(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				buf.WriteByte(',')
			}
			c.encode(buf, k)
			buf.WriteByte(':')
			c.encode(buf, v[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			c.encode(buf, x)
		}
		buf.WriteByte(']')
	case int64:
		switch rapid.IntRange(0, 3).Draw(c.t, "integer spelling") {
		case 0:
			fmt.Fprintf(buf, "%d", v)
		case 1:
			fmt.Fprintf(buf, "%d.0", v)
		case 2:
			fmt.Fprintf(buf, "%de-1", v*10)
		default:
			fmt.Fprintf(buf, "%dE+0", v)
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			c.t.Fatal(err)
		}
		buf.Write(b)
	}
}

func (c *conformanceCase) send(e *env) resp {
	path := c.op.path
	q := url.Values{}
	hdr := http.Header{}
	for _, p := range c.op.params {
		v, ok := c.params[p.name]
		if !ok {
			continue
		}
		s := fmt.Sprint(v)
		switch p.in {
		case "path":
			path = strings.Replace(path, "{"+p.name+"}", url.PathEscape(s), 1)
		case "query":
			q.Set(p.name, s)
		case "header":
			hdr.Set(p.name, s)
		}
	}
	var body io.Reader
	if c.op.body != "" {
		var buf bytes.Buffer
		c.encode(&buf, c.body)
		c.raw = buf.Bytes()
		body = bytes.NewReader(c.raw)
		hdr.Set("Content-Type", "application/json")
	}
	u := e.srv.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	r, err := http.NewRequest(c.op.method, u, body)
	if err != nil {
		c.t.Fatal(err)
	}
	r.Header = hdr
	if c.creds {
		for _, s := range c.op.security {
			switch s {
			case "admin":
				r.Header.Set(AdminTokenHeader, testAdminToken)
			case "session":
				token := c.fx.token
				if c.op.id == "login" || c.op.id == "logout" {
					// Both revoke the token they are called with: never the shared fixture's.
					token = freshSession(c.t, e)
				}
				r.Header.Set("Authorization", "Bearer "+token)
			}
		}
	}
	res, err := e.client.Do(r)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s %s %s -> %d %s", c.op.method, u, c.raw, res.StatusCode, b)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// checkDocumented: the status is documented for the operation, and the body validates against
// the schema documented for it and its media type. It returns the problem for a problem body.
func (c *conformanceCase) checkDocumented(r resp) *Problem {
	code := strconv.Itoa(r.status)
	ptr, ok := c.op.responses[code]
	if !ok {
		ptr, ok = c.op.responses[code[:1]+"XX"]
	}
	if !ok {
		c.t.Fatalf("%s answered %d, which the document does not list for it: %s", c.op.id, r.status, r.body)
	}
	if r.status >= 500 {
		c.t.Fatalf("%s answered %d: %s", c.op.id, r.status, r.body)
	}
	content, _ := c.doc.at(ptr + "/content").(map[string]any)
	if content == nil {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	if _, ok := content[mt]; !ok {
		c.t.Fatalf("%s answered %d as %q; documented: %v", c.op.id, r.status, mt, sortedKeys(content))
	}
	var inst any = r.body
	if !strings.HasSuffix(mt, "json") {
		inst = string(r.body)
	}
	if err := c.doc.validate(ptr+"/content/"+escapePtr(mt)+"/schema", inst); err != nil {
		c.t.Fatalf("%s %d body does not match its documented schema: %v\n%s", c.op.id, r.status, err, r.body)
	}
	if mt != "application/problem+json" {
		return nil
	}
	var p Problem
	if err := json.Unmarshal(r.body, &p); err != nil || p.Status != r.status {
		c.t.Fatalf("problem %s does not carry status %d (%v)", r.body, r.status, err)
	}
	return &p
}

func (c *conformanceCase) checkValid(r resp) {
	p := c.checkDocumented(r)
	if r.status/100 == 2 {
		c.fx.learn(c.op, r.body)
	}
	if r.status == http.StatusBadRequest {
		for _, f := range p.Errors {
			if !c.op.rules[f.Field] {
				c.t.Fatalf("%s refused a schema-valid request naming %q, not one of its x-business-rules: %+v", c.op.id, f.Field, p)
			}
		}
	}
}

func (c *conformanceCase) checkInvalid(r resp, field string) {
	p := c.checkDocumented(r)
	if r.status/100 != 4 || p == nil {
		c.t.Fatalf("%s answered a request violating %q with %d: %s", c.op.id, field, r.status, r.body)
	}
	for _, f := range p.Errors {
		if f.Field == field || strings.HasPrefix(f.Field, field+".") || strings.HasPrefix(field, f.Field+".") {
			return
		}
	}
	c.t.Fatalf("%s refused a request violating %q without naming it: %+v", c.op.id, field, p)
}

// --- one mutation ---

// site is a place a mutation can hit: a parameter, or a value inside the body.
type site struct {
	param string   // parameter name; "" for the body
	path  []string // member names from the body's root
	ptr   string   // schema pointer of the value there
}

// field names a site the way problems do.
func (s site) field() string {
	if s.param != "" {
		return s.param
	}
	if len(s.path) == 0 {
		return "body"
	}
	return strings.Join(s.path, ".")
}

func (c *conformanceCase) sites() []site {
	var out []site
	for _, p := range c.op.params {
		out = append(out, site{param: p.name, ptr: p.schema})
	}
	if c.op.body != "" {
		c.bodySites(c.body, c.op.body, nil, &out)
	}
	return out
}

func (c *conformanceCase) bodySites(v any, ptr string, path []string, out *[]site) {
	s, ptr := c.doc.deref(ptr)
	*out = append(*out, site{path: path, ptr: ptr})
	if a, ok := v.([]any); ok {
		for i, x := range a {
			c.bodySites(x, ptr+"/items", append(slices.Clone(path), strconv.Itoa(i)), out)
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	props, _ := s["properties"].(map[string]any)
	for _, k := range sortedKeys(m) {
		child := ptr + "/additionalProperties"
		if _, ok := props[k]; ok {
			child = ptr + "/properties/" + escapePtr(k)
		}
		c.bodySites(m[k], child, append(slices.Clone(path), k), out)
	}
}

// mutation is one way to break a site: it returns the new value (remove: drop it) and the
// field the refusal must name.
type mutation struct {
	name  string
	apply func(cur any) (v any, remove bool, field string)
}

// mutate breaks the request in exactly one place and returns the field a refusal must name.
// Every candidate is checked against the schema; one that still validates is not used.
func (c *conformanceCase) mutate() string {
	sites := c.sites()
	for _, st := range rotate(sites, rapid.IntRange(0, len(sites)-1).Draw(c.t, "first site")) {
		ms := c.mutations(st)
		for _, m := range rotate(ms, rapid.IntRange(0, len(ms)-1).Draw(c.t, "first mutation")) {
			v, remove, field := m.apply(c.get(st))
			if c.set(st, v, remove) {
				c.t.Logf("mutation: %s at %s", m.name, field)
				return field
			}
		}
	}
	c.t.Fatalf("%s: no mutation violates the schema", c.op.id)
	return ""
}

// rotate starts s at i, so every element gets its turn to be tried first.
func rotate[E any](s []E, i int) []E { return append(slices.Clone(s[i:]), s[:i]...) }

func (c *conformanceCase) get(st site) any {
	if st.param != "" {
		return c.params[st.param]
	}
	v := c.body
	for _, k := range st.path {
		v = member(v, k)
	}
	return v
}

// member is an object's member k or an array's element at index k.
func member(v any, k string) any {
	if a, ok := v.([]any); ok {
		i, _ := strconv.Atoi(k)
		return a[i]
	}
	return v.(map[string]any)[k]
}

// set puts v at st when that makes the request violate its schema, and reports whether it did.
func (c *conformanceCase) set(st site, v any, remove bool) bool {
	if st.param != "" {
		p := c.param(st.param)
		if remove {
			if !p.required || p.in == "path" {
				return false
			}
			delete(c.params, p.name)
			return true
		}
		if c.doc.validate(p.schema, v) == nil {
			return false
		}
		c.params[p.name] = v
		return true
	}
	body := deepCopy(c.body)
	if len(st.path) == 0 {
		body = v
	} else {
		parent := body
		for _, k := range st.path[:len(st.path)-1] {
			parent = member(parent, k)
		}
		last := st.path[len(st.path)-1]
		switch p := parent.(type) {
		case []any:
			if remove {
				return false // an array element is never required
			}
			i, _ := strconv.Atoi(last)
			p[i] = v
		case map[string]any:
			if remove {
				delete(p, last)
			} else {
				p[last] = v
			}
		}
	}
	if c.doc.validate(c.op.body, body) == nil {
		return false
	}
	c.body = body
	return true
}

// param is the operation's parameter named name.
func (c *conformanceCase) param(name string) parameter {
	for _, p := range c.op.params {
		if p.name == name {
			return p
		}
	}
	c.t.Fatalf("%s has no parameter %s", c.op.id, name)
	return parameter{}
}

func deepCopy(v any) any {
	if a, ok := v.([]any); ok {
		out := make([]any, len(a))
		for i, x := range a {
			out[i] = deepCopy(x)
		}
		return out
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = deepCopy(x)
	}
	return out
}

// mutations lists what can break the value at st. Parameters travel as text, so for them a
// "wrong type" is text that is no integer, and null does not exist.
func (c *conformanceCase) mutations(st site) []mutation {
	s := c.doc.flat(st.ptr)
	field := st.field()
	to := func(name string, v any) mutation {
		return mutation{name, func(any) (any, bool, string) { return v, false, field }}
	}
	var ms []mutation
	if st.param == "" {
		ms = append(ms, to("null", nil))
		for _, w := range []struct {
			typ string
			v   any
		}{{"integer", int64(7)}, {"string", "7"}, {"boolean", true}, {"array", []any{}}, {"object", map[string]any{}}} {
			if w.typ != s["type"] {
				ms = append(ms, to("wrong type "+w.typ, w.v))
			}
		}
	} else {
		if s["type"] == "integer" {
			ms = append(ms, to("not an integer", "7x"))
		}
		// A query or header parameter sent empty is not an absent one ("?date=").
		if p := c.param(st.param); p.in != "path" {
			ms = append(ms, to("empty", ""))
		}
	}
	if v, ok := s["minimum"].(float64); ok {
		ms = append(ms, to("below minimum", int64(v)-1))
	}
	if v, ok := s["maximum"].(float64); ok {
		ms = append(ms, to("above maximum", int64(v)+1))
	}
	if s["type"] == "string" || s["pattern"] != nil {
		ms = append(ms, to("too long", strings.Repeat("a", num(s["maxLength"], 199)+1)))
		// An empty path parameter is not this operation with a bad id but another path (one
		// with "//", a 404 for every path not in canonical form).
		if n := num(s["minLength"], 0); n > 0 && (n > 1 || st.param == "" || c.param(st.param).in != "path") {
			ms = append(ms, to("too short", strings.Repeat("a", n-1)))
		}
		ms = append(ms, mutation{"off pattern", func(cur any) (any, bool, string) {
			str, _ := cur.(string)
			return str[:len(str)/2] + "é!" + str[len(str)/2:], false, field
		}})
	}
	if _, ok := s["enum"]; ok {
		ms = append(ms, to("off enum", "not-in-the-enum"))
	}
	if cur, ok := c.get(st).([]any); ok && st.param == "" {
		if n := num(s["minItems"], 0); n > 0 {
			ms = append(ms, to("too few items", slices.Clone(cur[:n-1])))
		}
		if n, ok := s["maxItems"].(float64); ok && len(cur) > 0 {
			ms = append(ms, to("too many items", slices.Repeat(cur[:1], int(n)+1)))
		}
	}
	if not, ok := s["not"].(map[string]any); ok && not["const"] != nil {
		ms = append(ms, to("the excluded value", not["const"]))
	}
	if st.param != "" {
		return append(ms, mutation{"missing", func(any) (any, bool, string) { return nil, true, field }})
	}
	return append(ms, c.objectMutations(st, s)...)
}

// objectMutations break an object member by member: a required one missing, an unknown one, a
// key its propertyNames refuse, one member too many.
func (c *conformanceCase) objectMutations(st site, s map[string]any) []mutation {
	cur, ok := c.get(st).(map[string]any)
	if !ok || s["type"] != "object" {
		return nil
	}
	child := func(k string) string { return site{path: append(slices.Clone(st.path), k)}.field() }
	with := func(k string, v any) map[string]any {
		m := deepCopy(cur).(map[string]any)
		m[k] = v
		return m
	}
	var ms []mutation
	required, _ := s["required"].([]any)
	for _, r := range required {
		k := r.(string)
		ms = append(ms, mutation{"missing " + k, func(any) (any, bool, string) {
			m := deepCopy(cur).(map[string]any)
			delete(m, k)
			return m, false, child(k)
		}})
	}
	if s["additionalProperties"] == false {
		ms = append(ms, mutation{"unknown member", func(any) (any, bool, string) {
			return with("zz_unknown", "x"), false, child("zz_unknown")
		}})
	}
	if _, ok := s["additionalProperties"].(map[string]any); !ok {
		return ms
	}
	entry := c.value(st.ptr+"/additionalProperties", "entry")
	if _, ok := s["propertyNames"]; ok {
		for _, k := range []string{"", "Bad Key!", strings.Repeat("k", 65)} {
			ms = append(ms, mutation{fmt.Sprintf("bad key %q", k), func(any) (any, bool, string) {
				return with(k, entry), false, child(k)
			}})
		}
	}
	if n, ok := s["maxProperties"].(float64); ok {
		ms = append(ms, mutation{"too many members", func(any) (any, bool, string) {
			m := map[string]any{}
			for i := range int(n) + 1 {
				m[fmt.Sprintf("k%d", i)] = entry
			}
			return m, false, st.field()
		}})
	}
	return ms
}

// freshSession starts a guest session for one request that will revoke it.
func freshSession(t *rapid.T, e *env) string {
	res, err := e.client.Post(e.srv.URL+"/v1/sessions", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s struct{ Token string }
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || s.Token == "" {
		t.Fatalf("start session: %d %v", res.StatusCode, err)
	}
	return s.Token
}
