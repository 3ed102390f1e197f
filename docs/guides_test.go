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

// devMachine matches sentences about the machine shardmart is developed and tested on (its
// load, its cores, what it lacks), which belong on the evidence pages (docs/evidence), not in
// what a user reads to run shardmart.
var devMachine = regexp.MustCompile(`(?i)\bhere\)|\b(ran|run|started|had|seen|measured|available|obtainable|tested|exercised|no \w+) here\b|this machine|load average|\bloads? (of )?(about )?\d|no docker|none can be had|2-core|2 vcpu|loaded (test )?machine|other engineers|dev(elopment)? machine|test machine`)

// beingRewritten lists documents whose rewrite is under way elsewhere; each must still have a
// match, so that the entry goes once the rewrite lands.
var beingRewritten = map[string]bool{}

// TestUserDocsSayNothingOfTheDevelopmentMachine checks every Markdown file of the repository
// outside docs/evidence: the README, the guides, the references, the in-depth pages.
func TestUserDocsSayNothingOfTheDevelopmentMachine(t *testing.T) {
	checked := 0
	for _, f := range markdownFiles(t) {
		rel := filepath.ToSlash(strings.TrimPrefix(f, ".."+string(filepath.Separator)))
		if strings.HasPrefix(rel, "docs/evidence/") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		found := false
		for i, line := range strings.Split(string(b), "\n") {
			if m := devMachine.FindString(line); m != "" {
				found = true
				if !beingRewritten[rel] {
					t.Errorf("%s:%d: %q speaks of the development machine: move the measurement to docs/evidence (leaving a link), or say what a user's deployment sees", rel, i+1, m)
				}
			}
		}
		if beingRewritten[rel] && !found {
			t.Errorf("%s no longer speaks of the development machine: remove it from beingRewritten", rel)
		}
	}
	if checked < 30 {
		t.Errorf("%d Markdown files checked, want the README, the guides, the references and the docs", checked)
	}
}

func TestDevMachinePattern(t *testing.T) {
	for _, s := range []string{"at load 30", "(load 3x)", "a load of about 20", "on this machine", "none can be had here", "no Docker engine", "not run here)", "the load average 26", "a 2-core box", "seen here: x", "there is no mongos here"} {
		if !devMachine.MatchString(s) {
			t.Errorf("%q is not caught", s)
		}
	}
	for _, s := range []string{"a write-heavy load", "click here to see", "the load balancer", "Docker compose", "loaded from disk"} {
		if devMachine.MatchString(s) {
			t.Errorf("%q is caught, but says nothing of the machine", s)
		}
	}
}
