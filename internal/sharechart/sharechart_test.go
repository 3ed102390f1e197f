package sharechart

import (
	"strings"
	"testing"
)

// A nil row (no figure yet) is left out of the line, an all-zero row is drawn at 0 %, and every
// text is escaped.
func TestPanelSVG(t *testing.T) {
	svg := PanelSVG(Panel{
		Title:   `db.c<"x">`,
		Names:   []string{"sh0", "sh&1"},
		Data:    [][]int64{nil, {1, 1}, {3, 1}, {0, 0}},
		Writes:  [][]int64{nil, nil, {0, 4}, {2, 2}},
		XLabels: []string{"−1m", "now"},
		Note:    "dashed: <writes>",
	})
	for _, want := range []string{
		`aria-label="db.c&lt;&#34;x&#34;&gt;"`, `>db.c&lt;&#34;x&#34;&gt;</text>`, `>sh&amp;1</text>`, `>dashed: &lt;writes&gt;</text>`, `>now</text>`,
		`points="203.0,105.0 304.5,52.5 406.0,210.0"`, // sh0's data: the nil tick 0 left out
		`points="304.5,210.0 406.0,105.0"`,            // sh0's writes: ticks 2 and 3 only
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %s:\n%s", want, svg)
		}
	}
	if strings.Count(svg, "<polyline") != 4 {
		t.Errorf("want 4 lines (2 shards × data, writes):\n%s", svg)
	}
}
