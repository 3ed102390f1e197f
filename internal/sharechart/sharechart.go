// Package sharechart draws per-shard shares over time as SVG: each shard's data share (solid)
// and write share (dashed), 0–100 %. The advisor's report and the monitor's page both draw
// with it, so a simulated and a measured cluster look alike.
package sharechart

import (
	"fmt"
	"html"
	"strings"
)

// Colors are the shard colours, by shard index.
var Colors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// Color is shard i's colour.
func Color(i int) string { return Colors[i%len(Colors)] }

// Frame draws the w×h plot frame and its 0–100 % grid.
func Frame(b *strings.Builder, w, h int) {
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="none" stroke="#ccc"/>`, w, h)
	for _, p := range []int{0, 25, 50, 75, 100} {
		y := h - p*h/100
		fmt.Fprintf(b, `<line x1="0" x2="%d" y1="%d" y2="%d" stroke="#eee"/><text x="-6" y="%d" text-anchor="end">%d%%</text>`, w, y, y, y+4, p)
	}
}

// Series draws, for each shard named in names, its share of data (solid) and of writes
// (dashed) over the ticks of data and writes (per tick, per shard: bytes and write counts),
// and a legend.
func Series(b *strings.Builder, data, writes [][]int64, names []string, w, h int) {
	for s, name := range names {
		color := Color(s)
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, color, polyline(data, s, w, h))
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="4 3" points="%s"/>`, color, polyline(writes, s, w, h))
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`, w-70, 8+s*12, color, w-56, 12+s*12, html.EscapeString(name))
	}
}

// polyline is one shard's share per tick, the ticks spread over w.
func polyline(series [][]int64, shard, w, h int) string {
	var b strings.Builder
	n := len(series)
	for t, row := range series {
		v := Share(row, shard)
		x := float64(t+1) * float64(w) / float64(n)
		fmt.Fprintf(&b, "%.1f,%.1f ", x, float64(h)*(1-v))
	}
	return strings.TrimSpace(b.String())
}

// Share is row[shard]'s fraction of the row's total, 0 when the row is empty.
func Share(row []int64, shard int) float64 {
	var tot int64
	for _, x := range row {
		tot += x
	}
	if tot == 0 || shard >= len(row) {
		return 0
	}
	return float64(row[shard]) / float64(tot)
}
