package advise

import (
	"fmt"
	"html"
	"io"
	"strings"
)

var shardColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

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
		fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="none" stroke="#ccc"/>`, plotW, plotH)
		for _, p := range []int{0, 25, 50, 75, 100} {
			y := plotH - p*plotH/100
			fmt.Fprintf(&b, `<line x1="0" x2="%d" y1="%d" y2="%d" stroke="#eee"/><text x="-6" y="%d" text-anchor="end">%d%%</text>`, plotW, y, y, y+4, p)
		}
		days := int(r.TickLength.Hours() * float64(r.Ticks) / 24)
		for d := 0; d <= days; d++ {
			x := d * plotW / max(days, 1)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">day %d</text>`, x, plotH+14, d)
		}
		for s := 0; s < r.Shards; s++ {
			color := shardColors[s%len(shardColors)]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, color, polyline(r.Data, s, plotW, plotH))
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="4 3" points="%s"/>`, color, polyline(r.Writes, s, plotW, plotH))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">shard %d</text>`, plotW-70, 8+s*12, color, plotW-56, 12+s*12, s)
		}
		b.WriteString("</g></g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

func polyline(series [][]int64, shard, w, h int) string {
	var b strings.Builder
	n := len(series)
	for t, row := range series {
		sh := shares(row)
		v := 0.0
		if sh != nil {
			v = sh[shard]
		}
		x := float64(t+1) * float64(w) / float64(n)
		fmt.Fprintf(&b, "%.1f,%.1f ", x, float64(h)*(1-v))
	}
	return strings.TrimSpace(b.String())
}
