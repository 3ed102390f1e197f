// Package sharechart draws per-shard shares over time as SVG: each shard's data share (solid)
// and write share (dashed), 0–100 %. The advisor's report and the monitor's page both draw
// with it, so a simulated and a measured cluster look alike.
package sharechart

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Panel geometry: the plot starts marginTop-10 below the panel's top (room for the title) and
// is PanelHeight-10 high; the x labels and a note go below it.
const (
	PanelWidth  = 460
	PanelHeight = 220
	marginLeft  = 44
	marginTop   = 34
	svgWidth    = PanelWidth + 12              // PanelSVG: room for the last x label, centred on the right edge
	svgHeight   = marginTop + PanelHeight + 20 // PanelSVG: the plot, its x labels and a note
)

// Panel is one chart: each shard's data share (solid) and write share (dashed) per tick.
type Panel struct {
	Title        string   // drawn escaped
	Names        []string // the shards, in the order of the rows' columns
	Data, Writes [][]int64
	XLabels      []string // spread evenly from the plot's left edge to its right edge
	Note         string   // one line under the x labels, when set
}

// WritePanel draws p with its top-left corner at x0, y0 (a group inside an <svg>).
func WritePanel(b *strings.Builder, x0, y0 int, p Panel) {
	plotW, plotH := PanelWidth-marginLeft-10, PanelHeight-10
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`+"\n", x0, y0)
	fmt.Fprintf(b, `<text x="0" y="14" font-size="12">%s</text>`+"\n", html.EscapeString(p.Title))
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`, marginLeft, marginTop-10)
	Frame(b, plotW, plotH)
	last := max(len(p.XLabels)-1, 1)
	for i, l := range p.XLabels {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, i*plotW/last, plotH+14, html.EscapeString(l))
	}
	Series(b, p.Data, p.Writes, p.Names, plotW, plotH)
	if p.Note != "" {
		fmt.Fprintf(b, `<text x="0" y="%d" fill="#555">%s</text>`, plotH+30, html.EscapeString(p.Note))
	}
	b.WriteString("</g></g>\n")
}

// WriteDocument writes panels as one standalone SVG, cols panels a row, under a title and a
// line saying what the lines are.
func WriteDocument(out io.Writer, title, legend string, cols int, panels []Panel) error {
	rows := (len(panels) + cols - 1) / cols
	width, height := cols*(PanelWidth+20)+20, rows*(PanelHeight+marginTop+30)+60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="20" y="24" font-size="15">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="20" y="42" fill="#555">%s</text>`+"\n", html.EscapeString(legend))
	for i, p := range panels {
		WritePanel(&b, 20+(i%cols)*(PanelWidth+20), 60+(i/cols)*(PanelHeight+marginTop+30), p)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// PanelSVG is one panel as an inline <svg> of its own (the monitor's page: one per
// collection), labelled with its title for screen readers.
func PanelSVG(p Panel) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="sharechart" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		html.EscapeString(p.Title), svgWidth, svgHeight, svgWidth, svgHeight)
	WritePanel(&b, 0, 0, p)
	b.WriteString("</svg>\n")
	return b.String()
}

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

// polyline is one shard's share per tick, the ticks spread over w. A nil row (no figure for
// that tick: before the first sample, or no rate yet) is left out; an empty one is 0.
func polyline(series [][]int64, shard, w, h int) string {
	var b strings.Builder
	n := len(series)
	for t, row := range series {
		if row == nil {
			continue
		}
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
