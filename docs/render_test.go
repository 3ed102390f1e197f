package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	xhtml "golang.org/x/net/html"
)

// page is one Markdown file as a browser gets it: rendered to HTML the way GitHub renders it
// (GitHub-flavoured tables, task lists, autolinks; raw HTML kept; heading ids made by GitHub's
// rule), with the ids a fragment can name, the relative links and image sources, and the
// Markdown tree for the checks that read the source.
type page struct {
	src   []byte
	doc   ast.Node
	ids   map[string]bool
	links []string
}

// githubIDs gives each heading the id GitHub gives it: its slug, and for the n-th repeat of a
// slug the slug followed by -n.
type githubIDs struct{ seen map[string]int }

func (g *githubIDs) Generate(value []byte, _ ast.NodeKind) []byte {
	s := slug(string(value))
	n := g.seen[s]
	g.seen[s]++
	if n > 0 {
		return fmt.Appendf(nil, "%s-%d", s, n)
	}
	return []byte(s)
}

func (g *githubIDs) Put(value []byte) { g.seen[string(value)]++ }

var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	goldmark.WithRendererOptions(html.WithUnsafe()),
)

// renderPage renders src to HTML and reads the ids, links and image sources off the HTML.
func renderPage(src []byte) (page, error) {
	p := page{src: src, ids: map[string]bool{}}
	ctx := parser.NewContext(parser.WithIDs(&githubIDs{seen: map[string]int{}}))
	p.doc = markdown.Parser().Parse(text.NewReader(src), parser.WithContext(ctx))
	var out bytes.Buffer
	if err := markdown.Renderer().Render(&out, src, p.doc); err != nil {
		return p, fmt.Errorf("render: %w", err)
	}
	root, err := xhtml.Parse(&out)
	if err != nil {
		return p, fmt.Errorf("parse the rendered HTML: %w", err)
	}
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode {
			for _, a := range n.Attr {
				switch {
				case a.Key == "id", a.Key == "name" && n.Data == "a":
					p.ids[a.Val] = true
				case a.Key == "href" && n.Data == "a", a.Key == "src" && n.Data == "img":
					p.links = append(p.links, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return p, nil
}

// slug is GitHub's anchor for a heading: lower case, markup and punctuation dropped except
// '-' and '_', each space a '-'.
func slug(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownFiles returns every Markdown file of the repository, as paths from docs/ ("../README.md").
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.Clean(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files, want the README and the docs", len(files))
	}
	return files
}

// renderAll renders every Markdown file of the repository, keyed by its path from docs/.
func renderAll(t *testing.T) map[string]page {
	t.Helper()
	pages := map[string]page{}
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := renderPage(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pages[f] = p
	}
	return pages
}

// TestRenderedLinksResolve renders every Markdown file of the repository (the README, the
// guides, the references, the evidence) to HTML and checks each relative link and image of the
// HTML: the file it names exists and, for a Markdown page, the page as rendered has an element
// with the fragment's id.
func TestRenderedLinksResolve(t *testing.T) {
	pages := renderAll(t)
	checked := 0
	for path, p := range pages {
		for _, link := range p.links {
			u, err := url.Parse(link)
			if err != nil {
				t.Errorf("%s links to %q: %v", path, link, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue
			}
			file := path
			if u.Path != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(path), u.Path))
			}
			checked++
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s: no such file", path, link)
				continue
			}
			if u.Fragment == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !pages[file].ids[u.Fragment] {
				t.Errorf("%s links to %s: %s rendered has no element with id %q", path, link, file, u.Fragment)
			}
		}
	}
	if checked < 100 {
		t.Errorf("%d relative links checked, want the docs' hundreds", checked)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Outbox + projector":               "outbox--projector",
		"Sessions: read-your-writes":       "sessions-read-your-writes",
		"`deploy/mongodb` compose cluster": "deploymongodb-compose-cluster",
		"Read routing (RPL-1)":             "read-routing-rpl-1",
		"Client policy: [docs](x.md) here": "client-policy-docs-here",
		"Staleness of search across procs": "staleness-of-search-across-procs",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestRenderedPagesHaveGitHubAnchors: a page's headings get GitHub's ids, repeats numbered,
// and a link to a missing anchor is read off the HTML.
func TestRenderedPagesHaveGitHubAnchors(t *testing.T) {
	p, err := renderPage([]byte("# Outbox + projector\n\n## Notes\n\n## Notes\n\n<a id=\"raw\"></a>\n\nSee [x](other.md#nowhere) and ![c](c.png).\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"outbox--projector", "notes", "notes-1", "raw"} {
		if !p.ids[id] {
			t.Errorf("no id %q in %v", id, p.ids)
		}
	}
	if fmt.Sprint(p.links) != "[other.md#nowhere c.png]" {
		t.Errorf("links = %v, want [other.md#nowhere c.png]", p.links)
	}
}
