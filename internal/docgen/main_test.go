package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceIsCurrent fails when a page under docs/reference differs from what the code
// generates now, or when a page is there that the code no longer generates.
func TestReferenceIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	existing, err := existingPages(root)
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for p, want := range pages {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what the code generates now", p)
			stale++
		}
	}
	for _, p := range existing {
		if _, ok := pages[p]; !ok {
			t.Errorf("%s is no longer generated", p)
			stale++
		}
	}
	if stale > 0 {
		t.Logf("regenerate the reference with: %s", regenerate)
	}
	if len(pages) < 5 {
		t.Errorf("%d pages generated, want the CLI pages and 4 more", len(pages))
	}
}

// TestGenerationIsDeterministic: two runs give the same bytes, so the check above cannot
// fail on a clean tree (no dates, map orders or temporary paths in the pages).
func TestGenerationIsDeterministic(t *testing.T) {
	root := filepath.Join("..", "..")
	a, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for p := range a {
		if !bytes.Equal(a[p], b[p]) {
			t.Errorf("%s differs between two runs", p)
		}
	}
	if len(a) != len(b) {
		t.Errorf("%d pages, then %d", len(a), len(b))
	}
}
