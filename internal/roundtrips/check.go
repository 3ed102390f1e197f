package roundtrips

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MarkdownDirEnv names a directory: Check writes each placement's measured table there as
// <placement>.md, for docs/evidence/benchmarks.md.
const MarkdownDirEnv = "SHARDMART_ROUNDTRIPS_MD"

// Check holds a placement's table to Budgets: it fails t naming every kind over budget, with
// the whole measured table, and logs the table either way.
func Check(t testing.TB, tb Table) {
	t.Helper()
	md := tb.Markdown()
	t.Logf("statements per request, %s placement:\n%s", tb.Placement, md)
	if dir := os.Getenv(MarkdownDirEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, tb.Placement+".md"), []byte(md), 0o644); err != nil {
			t.Errorf("write the table: %v", err)
		}
	}
	if over := tb.Over(); len(over) > 0 {
		t.Errorf("%s placement: requests over their statement budget (roundtrips.Budgets):\n  %s\nmeasured:\n%s",
			tb.Placement, strings.Join(over, "\n  "), md)
	}
	for _, c := range tb.Counts {
		if b, ok := budgetOf(tb.Placement, c.Request); ok && c.Max < b {
			t.Logf("%s: %d statements, below its budget of %d: lower the budget", c.Request, c.Max, b)
		}
	}
}
