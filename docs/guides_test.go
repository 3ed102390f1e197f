package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGuidesStartFromWhatTheUserHasAndEndWithACheck: every task guide says first what the
// reader starts from, and its last section is how to check that it worked.
func TestGuidesStartFromWhatTheUserHasAndEndWithACheck(t *testing.T) {
	guides, err := filepath.Glob("guides/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) < 9 {
		t.Fatalf("%d guides, want at least 9", len(guides))
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		first := strings.SplitN(text, "\n\n", 3)
		if len(first) < 2 || !strings.HasPrefix(first[0], "# ") || !strings.HasPrefix(first[1], "**You have:**") {
			t.Errorf("%s: want a title, then a paragraph opening with **You have:**", g)
		}
		sections := regexp.MustCompile(`(?m)^## .*$`).FindAllString(text, -1)
		if len(sections) == 0 || sections[len(sections)-1] != "## Check that it worked" {
			t.Errorf("%s: the last section is %v, want ## Check that it worked", g, sections[len(sections)-1:])
		}
		if !strings.Contains(string(readme), "(docs/"+g+")") {
			t.Errorf("%s is not linked from the README", g)
		}
	}
}

// devMachine matches sentences about the machine shardmart is developed and tested on, which
// belong on the evidence pages (docs/evidence), not in what a user reads to run shardmart.
var devMachine = regexp.MustCompile(`(?i)\bhere\)|\b(ran|run|started|had) here\b|this machine|load average|\bat load \d|no docker|none can be had|2-core|2 vcpu|loaded (test )?machine|other engineers|dev(elopment)? machine`)

// TestUserDocsSayNothingOfTheDevelopmentMachine checks the README and the guides.
func TestUserDocsSayNothingOfTheDevelopmentMachine(t *testing.T) {
	files := []string{"../README.md"}
	guides, err := filepath.Glob("guides/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, guides...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := devMachine.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks of the development machine: move it to docs/evidence", f, i+1, m)
			}
		}
	}
}
