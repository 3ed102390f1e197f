package advise

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Figures derived from a Result; the report and the tests share them.

// FinalDataShare is each shard's share of the collection's bytes at the end.
func (r *Result) FinalDataShare() []float64 { return shares(r.Data[len(r.Data)-1]) }

// WriteShare is each shard's share of all writes over the run.
func (r *Result) WriteShare() []float64 { return r.writeShareBetween(0, len(r.Writes)) }

// writeShareBetween is each shard's share of the writes in ticks [from, to).
func (r *Result) writeShareBetween(from, to int) []float64 {
	tot := make([]int64, r.Shards)
	for _, w := range r.Writes[from:to] {
		for s, x := range w {
			tot[s] += x
		}
	}
	return shares(tot)
}

// Findings are the short warnings a reader should not miss.
func (r *Result) Findings() []string {
	var out []string
	fair := 1 / float64(r.Shards)
	if h := r.HottestWriteShare(); r.Shards > 1 && h >= 1.5*fair {
		out = append(out, fmt.Sprintf("hot shard (%s of writes)", pct(h)))
	}
	if n := len(r.Jumbo); n > 0 {
		out = append(out, fmt.Sprintf("%d jumbo chunk(s)", n))
	}
	if d := r.WorstDeviation(); d >= 0.25 {
		out = append(out, fmt.Sprintf("uneven data (a shard %s off its share)", pct(d)))
	}
	if r.Characteristics.Monotonic && r.Key[0].Kind != sharding.Hashed {
		out = append(out, "monotonic key")
	}
	var ops, scatter int64
	for _, o := range r.OpStats {
		if o.Type == OpInsert {
			continue
		}
		ops += o.Count
		scatter += o.ScatterGather
	}
	if ops > 0 && scatter*5 >= ops {
		out = append(out, fmt.Sprintf("%s of reads/updates scatter-gather", pct(float64(scatter)/float64(ops))))
	}
	if r.ZoneViolationsAtEnd > 0 {
		out = append(out, fmt.Sprintf("%d chunk(s) outside their zone", r.ZoneViolationsAtEnd))
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

// WorstDeviation is the largest |share - fair| / fair over shards at the end.
func (r *Result) WorstDeviation() float64 {
	fair := 1 / float64(r.Shards)
	worst := 0.0
	for _, s := range r.FinalDataShare() {
		worst = math.Max(worst, math.Abs(s-fair)/fair)
	}
	return worst
}

// HottestWriteShare is the mean over ticks of the busiest shard's share of
// that tick's writes: 1.0 means one shard takes every write.
func (r *Result) HottestWriteShare() float64 {
	var sum float64
	n := 0
	for _, w := range r.Writes {
		sh := shares(w)
		if sh == nil {
			continue
		}
		m := 0.0
		for _, x := range sh {
			m = math.Max(m, x)
		}
		sum += m
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// OneShardBeforeMove is the share of the inserts made before the balancer's
// first chunk move that went to the busiest shard.
func (r *Result) OneShardBeforeMove() float64 {
	sh := shares(r.InsertsBeforeMove)
	m := 0.0
	for _, x := range sh {
		m = math.Max(m, x)
	}
	return m
}

// TopChunkShare is the share of inserts that landed in the chunk holding MaxKey.
func (r *Result) TopChunkShare() float64 {
	if r.Inserts == 0 {
		return 0
	}
	return float64(r.TopChunkInserts) / float64(r.Inserts)
}

// Op returns the statistics of the named operation.
func (r *Result) Op(name string) (OpStat, bool) {
	for _, o := range r.OpStats {
		if o.Name == name {
			return o, true
		}
	}
	return OpStat{}, false
}

func shares(xs []int64) []float64 {
	var tot int64
	for _, x := range xs {
		tot += x
	}
	if tot == 0 {
		return nil
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x) / float64(tot)
	}
	return out
}

func pct(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) }

func pcts(fs []float64) string {
	if fs == nil {
		return "-"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%.0f", 100*f)
	}
	return strings.Join(parts, "/")
}

// Bytes renders a size in binary units.
func Bytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func (r *Result) label() string {
	l := keyPattern(r.Key)
	if len(r.Zones) > 0 {
		l += " +zones " + strings.Join(r.Zones, ",")
	}
	return l
}

func (r *Result) tickTime(t int) string {
	d := time.Duration(t+1) * r.TickLength
	return fmt.Sprintf("day %d %02d:%02d", int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60)
}

// WriteTable prints the side-by-side comparison of results that share a
// collection, then a terminal chart of data and write shares over time.
func WriteTable(out io.Writer, w *Workload, results []*Result) {
	for _, group := range groupByCollection(results) {
		writeGroup(out, w, group)
	}
}

// writeGroup writes the candidates for one collection side by side: a header, the table,
// findings and notes, then each candidate's chart.
func writeGroup(out io.Writer, w *Workload, group []*Result) {
	r0 := group[0]
	fmt.Fprintf(out, "\n== %s / %s: %d shards, chunk size %s, %d ops per candidate over %d days (%d ticks of %s), seed %d\n",
		w.Name, r0.Collection, r0.Shards, Bytes(r0.ChunkSize), r0.Ops, w.Days, r0.Ticks, r0.TickLength, w.Seed)
	if w.Description != "" {
		fmt.Fprintf(out, "%s\n", wrap(w.Description, 100))
	}
	fmt.Fprintln(out)
	writeRows(out, tableRows(w, group))
	fmt.Fprintln(out, "\nfindings:")
	for _, r := range group {
		fmt.Fprintf(out, "  %s: %s\n", r.label(), strings.Join(r.Findings(), "; "))
	}
	for _, r := range group {
		if r.SampleRepeats {
			fmt.Fprintf(out, "note: %s: more inserts than sample documents; the sample was replayed\n", r.label())
		}
	}
	fmt.Fprintln(out)
	for _, r := range group {
		WriteTerminalChart(out, r, 60)
	}
}

// tableRows is the comparison table of one collection's candidates: a row per measure, a
// column per candidate.
func tableRows(w *Workload, group []*Result) [][]string {
	r0 := group[0]
	rows := [][]string{{"shard key"}}
	add := func(name string, f func(*Result) string) {
		row := []string{name}
		for _, r := range group {
			row = append(row, f(r))
		}
		rows = append(rows, row)
	}
	for _, r := range group {
		rows[0] = append(rows[0], r.label())
	}
	perDay := r0.Ticks / w.Days
	for d := 1; d < w.Days && perDay > 0; d++ {
		t := d*perDay - 1
		add(fmt.Sprintf("data share per shard after day %d, %%", d), func(r *Result) string { return pcts(shares(r.Data[t])) })
		add(fmt.Sprintf("write share per shard on day %d, %%", d), func(r *Result) string { return pcts(r.writeShareBetween(t+1-perDay, t+1)) })
	}
	add("data share per shard at end, %", func(r *Result) string { return pcts(r.FinalDataShare()) })
	add("worst shard vs fair share", func(r *Result) string { return "±" + pct(r.WorstDeviation()) })
	add("write share per shard, %", func(r *Result) string { return pcts(r.WriteShare()) })
	add("hottest shard's write share", func(r *Result) string { return pct(r.HottestWriteShare()) })
	add("inserts into the max chunk", func(r *Result) string { return pct(r.TopChunkShare()) })
	add("inserts on one shard before 1st move", func(r *Result) string { return pct(r.OneShardBeforeMove()) })
	add("first chunk move", (*Result).firstMoveCell)
	add("chunk moves (data moved)", func(r *Result) string {
		return fmt.Sprintf("%d (%s)", r.ChunkMoves, Bytes(r.MovedBytes))
	})
	add("busiest chunk-move routes", func(r *Result) string { return routes(r.Moves, 3) })
	add("chunks (per shard)", (*Result).chunksCell)
	add("jumbo chunks", (*Result).jumboCell)
	add("zone violations at end", func(r *Result) string { return fmt.Sprint(r.ZoneViolationsAtEnd) })
	add("distinct key values (sampled docs)", func(r *Result) string {
		return fmt.Sprintf("%d (%d)", r.Characteristics.Distinct, r.Characteristics.SampledDocs)
	})
	add("most common key value", (*Result).mostCommonCell)
	add("monotonicity (r, type)", (*Result).monotonicityCell)
	for i, op := range r0.OpStats {
		add("op "+op.Name+": 1/multi/all", func(r *Result) string { return opCell(r.OpStats[i]) })
	}
	return rows
}

// The cells of tableRows that take more than a line.

func (r *Result) firstMoveCell() string {
	if r.FirstMoveTick < 0 {
		return "never"
	}
	return r.tickTime(r.FirstMoveTick)
}

func (r *Result) chunksCell() string {
	parts := make([]string, len(r.ChunksPerShard))
	for i, c := range r.ChunksPerShard {
		parts[i] = fmt.Sprint(c)
	}
	return fmt.Sprintf("%d (%s)", r.Chunks, strings.Join(parts, "/"))
}

func (r *Result) jumboCell() string {
	if len(r.Jumbo) == 0 {
		return "none"
	}
	j := r.Jumbo[0]
	s := fmt.Sprintf("%d: %s %s on shard %d", len(r.Jumbo), j.Key, Bytes(j.Bytes), j.Shard)
	if len(r.Jumbo) > 1 {
		s += ", …"
	}
	return s
}

func (r *Result) mostCommonCell() string {
	kc := r.Characteristics
	if len(kc.MostCommon) == 0 {
		return "-"
	}
	m := kc.MostCommon[0]
	if m.Docs == 1 {
		return "every sampled value unique"
	}
	return fmt.Sprintf("%s %s", m.Value, pct(float64(m.Docs)/float64(kc.SampledDocs)))
}

func (r *Result) monotonicityCell() string {
	t := "not monotonic"
	if r.Characteristics.Monotonic {
		t = "monotonic"
	}
	return fmt.Sprintf("%.2f %s", r.Characteristics.Monotonicity, t)
}

// opCell is how an operation was routed: the shares of single-shard, multi-shard and
// scatter-gather executions, and the mean number of shards hit.
func opCell(o OpStat) string {
	if o.Count == 0 {
		return "-"
	}
	n := float64(o.Count)
	return fmt.Sprintf("%.0f/%.0f/%.0f %% ~%.1f shards", 100*float64(o.SingleShard)/n,
		100*float64(o.MultiShard)/n, 100*float64(o.ScatterGather)/n, float64(o.ShardsHit)/n)
}

func groupByCollection(results []*Result) [][]*Result {
	var out [][]*Result
	idx := map[string]int{}
	for _, r := range results {
		i, ok := idx[r.Collection]
		if !ok {
			i = len(out)
			idx[r.Collection] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

func writeRows(out io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for ri, row := range rows {
		var b strings.Builder
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
		if ri == 0 {
			total := 0
			for _, w := range widths {
				total += w + 2
			}
			fmt.Fprintln(out, strings.Repeat("-", total-2))
		}
	}
}

func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

var blocks = []rune(" ▁▂▃▄▅▆▇█")

// WriteTerminalChart draws each shard's data share and write share over time
// as block characters (full block = 100 %), at most width columns.
func WriteTerminalChart(out io.Writer, r *Result, width int) {
	cols := min(width, r.Ticks)
	fmt.Fprintf(out, "%s — data share | write share per shard over %s (█ = 100 %%)\n", r.label(), r.TickLength*time.Duration(r.Ticks))
	for s := 0; s < r.Shards; s++ {
		fmt.Fprintf(out, "  shard %d  %s | %s\n", s, spark(r.Data, s, cols), spark(r.Writes, s, cols))
	}
	fmt.Fprintln(out)
}

func spark(series [][]int64, shard, cols int) string {
	var b strings.Builder
	for c := 0; c < cols; c++ {
		t := (c+1)*len(series)/cols - 1
		sh := shares(series[t])
		v := 0.0
		if sh != nil {
			v = sh[shard]
		}
		b.WriteRune(blocks[int(math.Round(v*float64(len(blocks)-1)))])
	}
	return b.String()
}

// routes summarises chunk moves by donor and recipient, busiest first.
func routes(moves []ChunkMove, n int) string {
	if len(moves) == 0 {
		return "-"
	}
	type route struct{ from, to, count int }
	idx := map[[2]int]int{}
	var rs []route
	for _, m := range moves {
		k := [2]int{m.From, m.To}
		i, ok := idx[k]
		if !ok {
			i = len(rs)
			idx[k] = i
			rs = append(rs, route{from: m.From, to: m.To})
		}
		rs[i].count++
	}
	slices.SortStableFunc(rs, func(a, b route) int { return cmp.Compare(b.count, a.count) })
	parts := make([]string, 0, n)
	for _, r := range rs[:min(n, len(rs))] {
		parts = append(parts, fmt.Sprintf("%d→%d ×%d", r.from, r.to, r.count))
	}
	return strings.Join(parts, ", ")
}

// WriteMoves lists the first n chunk moves of a result, as the balancer
// would log them.
func WriteMoves(out io.Writer, r *Result, n int) {
	if r.ChunkMoves == 0 {
		fmt.Fprintf(out, "%s / %s — no chunk moves\n\n", r.Collection, r.label())
		return
	}
	fmt.Fprintf(out, "%s / %s — first %d of %d chunk moves:\n", r.Collection, r.label(), min(n, len(r.Moves)), r.ChunkMoves)
	for _, m := range r.Moves[:min(n, len(r.Moves))] {
		fmt.Fprintf(out, "  %s  shard %d → shard %d  %8s  range from %s\n", r.tickTime(m.Tick), m.From, m.To, Bytes(m.Bytes), m.Min)
	}
	fmt.Fprintln(out)
}
