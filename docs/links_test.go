package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdown is one Markdown file: its links and the anchors its headings define.
type markdown struct {
	links   []string
	anchors map[string]bool
}

// parseMarkdown reads the links and heading anchors outside fenced code blocks and code spans.
func parseMarkdown(src string) markdown {
	md := markdown{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			md.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				md.anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				md.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			md.links = append(md.links, m[1])
		}
	}
	return md
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

// TestMarkdownLinksResolve: every relative link in every Markdown file of the repository
// names a file that exists and, for a Markdown target, an anchor one of its headings makes.
func TestMarkdownLinksResolve(t *testing.T) {
	root := ".."
	files := map[string]markdown{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.Clean(path)] = parseMarkdown(string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files, want the README and the docs", len(files))
	}
	checked := 0
	for path, md := range files {
		for _, link := range md.links {
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			file := path
			if target != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(path), target))
			}
			checked++
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s: no such file", path, link)
				continue
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !files[file].anchors[anchor] {
				t.Errorf("%s links to %s: %s has no heading with anchor #%s", path, link, file, anchor)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link checked")
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
