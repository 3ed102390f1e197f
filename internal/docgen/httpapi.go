package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// openapiFile is the OpenAPI document the server embeds and serves at /openapi.json.
const openapiFile = "internal/httpapi/openapi.yaml"

var methods = []string{"get", "put", "post", "patch", "delete"}

// genHTTPAPI renders the OpenAPI document: every operation with its access, parameters, body,
// business rules and responses, then every schema as the document states it.
func genHTTPAPI(root string, pages map[string][]byte) error {
	raw, err := os.ReadFile(filepath.Join(root, openapiFile))
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", openapiFile, err)
	}
	d := &apiDoc{root: doc.Content[0]}
	var b strings.Builder
	b.WriteString(header("HTTP API", "the OpenAPI document "+openapiFile+", which the server serves at `/openapi.json`"))
	fmt.Fprintf(&b, "OpenAPI %s, version %s.\n\n", d.scalar(d.root, "openapi"), d.scalar(d.at(d.root, "info"), "version"))
	b.WriteString(strings.TrimSpace(d.scalar(d.at(d.root, "info"), "description")) + "\n")

	b.WriteString("\n## Authentication\n\n| scheme | how |\n|---|---|\n")
	for _, s := range pairs(d.at(d.root, "components", "securitySchemes")) {
		how := d.scalar(s.val, "type")
		if sch := d.scalar(s.val, "scheme"); sch != "" {
			how += " " + sch
		}
		if n := d.scalar(s.val, "name"); n != "" {
			how += ", " + d.scalar(s.val, "in") + " `" + n + "`"
		}
		if desc := d.scalar(s.val, "description"); desc != "" {
			how += ": " + desc
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", s.key, cell(how))
	}

	b.WriteString("\n## Operations\n")
	global := d.security(d.at(d.root, "security"))
	for _, p := range pairs(d.at(d.root, "paths")) {
		shared := d.at(p.val, "parameters")
		for _, m := range methods {
			op := d.at(p.val, m)
			if op == nil {
				continue
			}
			fmt.Fprintf(&b, "\n### %s %s\n\n", strings.ToUpper(m), p.key)
			fmt.Fprintf(&b, "%s.\n", strings.TrimSuffix(d.scalar(op, "summary"), "."))
			if desc := d.scalar(op, "description"); desc != "" {
				b.WriteString("\n" + strings.TrimSpace(desc) + "\n")
			}
			access := global
			if sec := d.at(op, "security"); sec != nil {
				access = d.security(sec)
			}
			fmt.Fprintf(&b, "\nAccess: %s.\n", access)
			d.params(&b, append(d.items(shared), d.items(d.at(op, "parameters"))...))
			if rb := d.at(op, "requestBody"); rb != nil {
				rb = d.deref(rb)
				req := "optional"
				if d.scalar(rb, "required") == "true" {
					req = "required"
				}
				fmt.Fprintf(&b, "\nRequest body (%s): %s\n", req, d.content(rb))
			}
			if rules := d.at(op, "x-business-rules"); rules != nil {
				b.WriteString("\nRules the schema cannot state (each a 400 naming the field):\n\n")
				for _, r := range d.items(rules) {
					fmt.Fprintf(&b, "- `%s` %s\n", d.scalar(r, "field"), d.scalar(r, "rule"))
				}
			}
			b.WriteString("\n| status | meaning | body |\n|---|---|---|\n")
			for _, r := range pairs(d.at(op, "responses")) {
				resp := d.deref(r.val)
				fmt.Fprintf(&b, "| %s | %s | %s |\n", r.key, cell(d.scalar(resp, "description")), cell(d.content(resp)))
			}
		}
	}

	b.WriteString("\n## Schemas\n")
	for _, s := range pairs(d.at(d.root, "components", "schemas")) {
		fmt.Fprintf(&b, "\n### %s\n\n```yaml\n%s```\n", s.key, block(s.val))
	}
	pages[path.Join(refDir, "http-api.md")] = []byte(b.String())
	return nil
}

// apiDoc navigates the document's YAML nodes, keeping its order.
type apiDoc struct{ root *yaml.Node }

type pair struct {
	key string
	val *yaml.Node
}

func pairs(n *yaml.Node) []pair {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, pair{n.Content[i].Value, n.Content[i+1]})
	}
	return out
}

func (d *apiDoc) at(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		var next *yaml.Node
		for _, p := range pairs(n) {
			if p.key == k {
				next = p.val
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func (d *apiDoc) scalar(n *yaml.Node, key string) string {
	if v := d.at(n, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

func (d *apiDoc) items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// deref follows a local $ref ("#/components/parameters/Limit").
func (d *apiDoc) deref(n *yaml.Node) *yaml.Node {
	for n != nil {
		ref := d.scalar(n, "$ref")
		if ref == "" {
			return n
		}
		n = d.at(d.root, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	}
	return n
}

// security renders a security requirement list: "none" for [], else the schemes.
func (d *apiDoc) security(n *yaml.Node) string {
	var names []string
	for _, req := range d.items(n) {
		for _, p := range pairs(req) {
			names = append(names, "`"+p.key+"`")
		}
	}
	if len(names) == 0 {
		return "public"
	}
	return strings.Join(names, " or ")
}

func (d *apiDoc) params(b *strings.Builder, ps []*yaml.Node) {
	if len(ps) == 0 {
		return
	}
	b.WriteString("\n| parameter | in | required | schema | description |\n|---|---|---|---|---|\n")
	for _, p := range ps {
		p = d.deref(p)
		req := "no"
		if d.scalar(p, "required") == "true" {
			req = "yes"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", d.scalar(p, "name"), d.scalar(p, "in"), req,
			cell(schemaRef(d.at(p, "schema"))), cell(d.scalar(p, "description")))
	}
}

// content names each media type's schema: a link to a named schema, or the inline schema.
func (d *apiDoc) content(n *yaml.Node) string {
	var parts []string
	for _, c := range pairs(d.at(n, "content")) {
		parts = append(parts, "`"+c.key+"` "+schemaRef(d.at(c.val, "schema")))
	}
	return strings.Join(parts, "; ")
}

// schemaRef links a $ref to its schema section, or shows an inline schema on one line.
func schemaRef(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	for _, p := range pairs(n) {
		if p.key == "$ref" {
			name := p.val.Value[strings.LastIndex(p.val.Value, "/")+1:]
			return "[" + name + "](#" + strings.ToLower(name) + ")"
		}
	}
	return "`" + flow(n) + "`"
}

// flow is n on one line, in YAML's flow style.
func flow(n *yaml.Node) string {
	c := deepCopy(n)
	setFlow(c)
	out, err := yaml.Marshal(c)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// block is n as an indented YAML block, as the document writes it.
func block(n *yaml.Node) string {
	out, err := yaml.Marshal(n)
	if err != nil {
		return "# " + err.Error() + "\n"
	}
	return string(out)
}

func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = nil
	for _, k := range n.Content {
		c.Content = append(c.Content, deepCopy(k))
	}
	return &c
}

func setFlow(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style |= yaml.FlowStyle
	}
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		n.Style = yaml.DoubleQuotedStyle
	}
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, k := range n.Content {
		setFlow(k)
	}
}
