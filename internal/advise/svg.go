package advise

import (
	"fmt"
	"io"

	"github.com/shardmart/shardmart/internal/sharechart"
)

// WriteSVG draws one panel per result: each shard's data share (solid) and
// write share (dashed) over simulated time, 0–100 %.
func WriteSVG(out io.Writer, title string, results []*Result) error {
	panels := make([]sharechart.Panel, len(results))
	for i, r := range results {
		days := int(r.TickLength.Hours() * float64(r.Ticks) / 24)
		labels := make([]string, days+1)
		for d := range labels {
			labels[d] = fmt.Sprintf("day %d", d)
		}
		names := make([]string, r.Shards)
		for s := range names {
			names[s] = fmt.Sprintf("shard %d", s)
		}
		panels[i] = sharechart.Panel{Title: r.Collection + " — " + r.label(), Names: names, Data: r.Data, Writes: r.Writes, XLabels: labels}
	}
	return sharechart.WriteDocument(out, title, "solid: data share per shard · dashed: write share per shard · x: simulated time", 2, panels)
}
