package advise

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/shardmart/shardmart/internal/sharechart"
)

// WriteSVG draws one panel per result: each shard's data share (solid) and
// write share (dashed) over simulated time, 0–100 %.
func WriteSVG(out io.Writer, title string, results []*Result) error {
	const (
		pw, ph     = 460, 220 // panel
		ml, mt, mb = 44, 34, 30
		cols       = 2
	)
	rows := (len(results) + cols - 1) / cols
	width, height := cols*(pw+20)+20, rows*(ph+mt+mb)+60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="20" y="24" font-size="15">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="20" y="42" fill="#555">solid: data share per shard · dashed: write share per shard · x: simulated time</text>`+"\n")
	for i, r := range results {
		x0 := 20 + (i%cols)*(pw+20)
		y0 := 60 + (i/cols)*(ph+mt+mb)
		plotW, plotH := pw-ml-10, ph-10
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`+"\n", x0, y0)
		fmt.Fprintf(&b, `<text x="0" y="14" font-size="12">%s — %s</text>`+"\n", html.EscapeString(r.Collection), html.EscapeString(r.label()))
		fmt.Fprintf(&b, `<g transform="translate(%d,%d)">`, ml, mt-10)
		sharechart.Frame(&b, plotW, plotH)
		days := int(r.TickLength.Hours() * float64(r.Ticks) / 24)
		for d := 0; d <= days; d++ {
			x := d * plotW / max(days, 1)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">day %d</text>`, x, plotH+14, d)
		}
		names := make([]string, r.Shards)
		for s := range names {
			names[s] = fmt.Sprintf("shard %d", s)
		}
		sharechart.Series(&b, r.Data, r.Writes, names, plotW, plotH)
		b.WriteString("</g></g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}
