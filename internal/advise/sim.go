package advise

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is what one candidate key did under the workload.
type Result struct {
	Collection string
	Key        KeySpec
	Zones      []string
	Shards     int
	Ticks      int
	TickLength time.Duration
	ChunkSize  int64

	// Per tick and shard: data bytes at the end of the tick, writes during it.
	Data   [][]int64
	Writes [][]int64

	Ops                 int64
	Inserts             int64
	TopChunkInserts     int64 // inserts that landed in the chunk holding MaxKey
	FirstMigrationTick  int   // -1: the balancer never moved anything
	InsertsBeforeMove   []int64
	Migrations          int
	MigratedBytes       int64
	Chunks              int
	ChunksPerShard      []int
	Jumbo               []JumboChunk
	OpStats             []OpStat
	Characteristics     KeyCharacteristics
	SampleRepeats       bool // more inserts than sample documents: the sample was replayed
	ZoneViolationsAtEnd int
	Moves               []Migration // the first migrations, at most 10000
}

// Migration is one range the balancer moved.
type Migration struct {
	Tick     int
	From, To int
	Min      string // the range's lower bound, rendered
	Bytes    int64
}

// JumboChunk is a chunk that holds one key value and exceeds the chunk size.
type JumboChunk struct {
	Key   string // the key value, rendered
	Bytes int64
	Shard int
}

// OpStat classifies one declared operation the way analyzeShardKey's
// readWriteDistribution does: single-shard, multi-shard (targeted by the
// key but spanning shards) and scatter-gather (no usable key predicate).
type OpStat struct {
	Name          string
	Type          OpType
	Count         int64
	SingleShard   int64
	MultiShard    int64
	ScatterGather int64
	ShardsHit     int64 // sum over operations, for the mean
}

// KeyCharacteristics are analyzeShardKey-style figures over the inserted
// documents (evenly sampled, at most characteristicsSample documents).
type KeyCharacteristics struct {
	SampledDocs int64
	Distinct    int64
	MostCommon  []ValueFreq
	// Correlation between shard-key index order and insertion order;
	// |r| >= 0.7 is "monotonic" (analyzeShardKey's default threshold).
	Monotonicity float64
	Monotonic    bool
}

// ValueFreq is one frequent shard-key value.
type ValueFreq struct {
	Value string
	Docs  int64
}

const characteristicsSample = 25_000

// Simulate runs every candidate of every collection of w.
func Simulate(ctx context.Context, w *Workload) ([]*Result, error) {
	var out []*Result
	for _, c := range w.Collections {
		for _, cand := range c.Candidates {
			r, err := SimulateCandidate(ctx, w, c, cand)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// opPlan is an operation with its targeting against one shard key resolved.
type opPlan struct {
	op        *Operation
	eqPrefix  int  // leading key fields given by equality
	rangeOn   bool // the range filter is on key field eqPrefix (not hashed)
	full      bool // the whole key is given: exactly one chunk
	broadcast bool
	filterIdx []int
	rangeIdx  int
}

func planOp(op *Operation, k KeySpec, c *Collection) opPlan {
	p := opPlan{op: op, rangeIdx: -1}
	eq := map[string]bool{}
	for _, f := range op.Filter {
		eq[f] = true
	}
	for _, f := range k.Fields {
		if !eq[f.Name] {
			break
		}
		p.eqPrefix++
	}
	p.full = p.eqPrefix == len(k.Fields)
	if op.Range != nil && !p.full {
		kf := k.Fields[p.eqPrefix]
		if kf.Name == op.Range.Field && !kf.Hashed {
			p.rangeOn = true
			p.rangeIdx = c.fieldIdx[op.Range.Field]
		}
	}
	p.broadcast = p.eqPrefix == 0 && !p.rangeOn
	return p
}

// sim is the state of one candidate's run.
type sim struct {
	w    *Workload
	c    *Collection
	key  KeySpec
	g    *docGen
	cl   *cluster
	buf  []byte
	buf2 []byte
}

// encodeKey appends document d's shard-key value (hashed where the key says).
func (s *sim) encodeKey(dst []byte, d int64) []byte {
	for _, f := range s.key.Fields {
		v := s.g.value(d, f.idx)
		if f.Hashed {
			dst = appendHashedPart(dst, Hash64(v))
		} else {
			dst = appendKeyPart(dst, v)
		}
	}
	return dst
}

func (s *sim) docSize(d int64) uint32 {
	if s.c.Sample != nil {
		return uint32(s.c.Sample[d%int64(len(s.c.Sample))].size)
	}
	return uint32(s.c.DocBytes)
}

// encodeBound encodes a zone bound: given values, then MinKey for the rest.
// A hashed field's bound is the hash value itself.
func encodeBound(k KeySpec, vals []Value) []byte {
	var b []byte
	for i, f := range k.Fields {
		switch {
		case i >= len(vals):
			b = append(b, tagMin)
		case f.Hashed && vals[i].Kind == KindInt:
			b = appendHashedPart(b, vals[i].I)
		default:
			b = appendKeyPart(b, vals[i])
		}
	}
	return b
}

// checkOverlap refuses overlapping zone ranges, as sh.updateZoneKeyRange does.
func checkOverlap(cand Candidate, zs []zoneState) error {
	type rng struct {
		lo, hi string
		zone   string
	}
	var all []rng
	for _, z := range zs {
		for _, r := range z.ranges {
			all = append(all, rng{r[0], r[1], z.name})
		}
	}
	slices.SortFunc(all, func(a, b rng) int { return strings.Compare(a.lo, b.lo) })
	for i := 1; i < len(all); i++ {
		if all[i].lo < all[i-1].hi {
			return fmt.Errorf("%s: zone ranges of %s and %s overlap", cand.Key, all[i-1].zone, all[i].zone)
		}
	}
	return nil
}

// boundKey is encodeBound as a chunk-bound string; the all-MinKey bound is
// the collection's lowest bound "" and the all-MaxKey bound is keyMax.
func boundKey(k KeySpec, vals []Value) string {
	b := string(encodeBound(k, vals))
	if strings.Trim(b, string(rune(tagMin))) == "" {
		return ""
	}
	if strings.Trim(b, "\x81") == "" {
		return keyMax
	}
	return b
}

// SimulateCandidate runs one collection under one candidate key. Every
// candidate sees the same operation stream for a given seed.
func SimulateCandidate(ctx context.Context, w *Workload, c *Collection, cand Candidate) (*Result, error) {
	totalW, insertW := 0, 0
	for _, op := range c.Operations {
		totalW += op.Weight
		if op.Type == OpInsert {
			insertW += op.Weight
		}
	}
	if totalW == 0 {
		return nil, fmt.Errorf("collection %s: all operation weights are 0", c.Name)
	}
	ticks := w.Days * w.TicksPerDay
	span := time.Duration(w.Days) * 24 * time.Hour
	expectedInserts := max(1, w.Ops*int64(insertW)/int64(totalW))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	s := &sim{w: w, c: c, key: cand.Key,
		g:  newDocGen(c, w.Seed, t0, float64(span.Milliseconds())/float64(expectedInserts)),
		cl: newCluster(w.Shards, w.ChunkSize)}
	s.cl.initChunks(cand.Key)
	firehose := -1
	for zi, z := range cand.Zones {
		zs := zoneState{name: z.Name, firehose: z.Firehose}
		for _, sh := range z.Shards {
			zs.mask |= 1 << sh
		}
		for _, r := range z.Ranges {
			zs.ranges = append(zs.ranges, [2]string{boundKey(cand.Key, r.Min), boundKey(cand.Key, r.Max)})
		}
		if z.Firehose {
			if z.Roll {
				firehose = zi
			}
			zs.ranges = [][2]string{{s.firehoseBound(0), keyMax}}
		}
		s.cl.zones = append(s.cl.zones, zs)
	}
	if err := checkOverlap(cand, s.cl.zones); err != nil {
		return nil, fmt.Errorf("collection %s: %w", c.Name, err)
	}
	s.cl.applyZones()
	s.cl.placeZones()

	res := &Result{Collection: c.Name, Key: cand.Key, Shards: w.Shards, Ticks: ticks,
		TickLength: span / time.Duration(ticks), ChunkSize: w.ChunkSize, FirstMigrationTick: -1,
		InsertsBeforeMove: make([]int64, w.Shards)}
	for _, z := range cand.Zones {
		name := z.Name
		switch {
		case z.Firehose && z.Roll:
			name += " (firehose, daily roll)"
		case z.Firehose:
			name += " (firehose, never rolled)"
		}
		res.Zones = append(res.Zones, name)
	}
	plans := make([]opPlan, len(c.Operations))
	weights := make([]float64, len(c.Operations))
	res.OpStats = make([]OpStat, len(c.Operations))
	for i := range c.Operations {
		plans[i] = planOp(&c.Operations[i], cand.Key, c)
		weights[i] = float64(c.Operations[i].Weight)
		res.OpStats[i] = OpStat{Name: c.Operations[i].Name, Type: c.Operations[i].Type}
	}
	opCDF := cumulative(weights)

	rng := mix(w.Seed, 0x5eed)
	var inserted int64
	for tick := 0; tick < ticks; tick++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		writes := make([]int64, w.Shards)
		n := w.Ops*int64(tick+1)/int64(ticks) - w.Ops*int64(tick)/int64(ticks)
		for j := int64(0); j < n; j++ {
			rng = mix(rng, uint64(j))
			pi := pick(opCDF, unit(rng))
			p := &plans[pi]
			st := &res.OpStats[pi]
			st.Count++
			if p.op.Type == OpInsert {
				d := inserted
				inserted++
				s.buf = s.encodeKey(s.buf[:0], d)
				ci := s.cl.find(s.buf)
				sh := s.cl.chunks[ci].shard
				if ci == len(s.cl.chunks)-1 {
					res.TopChunkInserts++
				}
				if res.FirstMigrationTick < 0 {
					res.InsertsBeforeMove[sh]++
				}
				s.cl.insert(ci, s.buf, s.docSize(d))
				writes[sh]++
				st.SingleShard++
				st.ShardsHit++
				continue
			}
			if inserted == 0 {
				// Nothing to address yet: not counted in the distribution.
				st.Count--
				continue
			}
			d := s.target(p.op, inserted, rng)
			hit := s.hits(p, d, inserted)
			st.ShardsHit += int64(hit)
			switch {
			case p.broadcast:
				st.ScatterGather++
			case hit == 1:
				st.SingleShard++
			default:
				st.MultiShard++
			}
			if p.op.Type == OpUpdate || p.op.Type == OpDelete {
				// The write happens where the document lives, whichever
				// shards the filter had to ask.
				s.buf = s.encodeKey(s.buf[:0], d)
				ci := s.cl.find(s.buf)
				writes[s.cl.chunks[ci].shard]++
				if p.op.Type == OpDelete {
					s.cl.remove(ci, s.docSize(d))
				}
			}
		}
		if w.Balancer.Enabled {
			s.cl.tick = tick
			if s.cl.balance(w.Balancer.RoundsPerTick) > 0 && res.FirstMigrationTick < 0 {
				res.FirstMigrationTick = tick
			}
		}
		res.Data = append(res.Data, slices.Clone(s.cl.shardBytes))
		res.Writes = append(res.Writes, writes)
		if firehose >= 0 && (tick+1)%w.TicksPerDay == 0 {
			// The daily job of the chapter: the zone now starts at the current
			// key value, so yesterday's chunks may leave the firehose shard.
			s.cl.zones[firehose].ranges[0][0] = s.firehoseBound(inserted)
			s.cl.applyZones()
		}
	}
	res.Ops = w.Ops
	res.Inserts = inserted
	res.Migrations = s.cl.migrations
	res.MigratedBytes = s.cl.migratedBytes
	res.Chunks = len(s.cl.chunks)
	res.ChunksPerShard = slices.Clone(s.cl.shardChunks)
	res.SampleRepeats = c.Sample != nil && inserted > int64(len(c.Sample))
	for _, m := range s.cl.moves {
		res.Moves = append(res.Moves, Migration{Tick: m.tick, From: m.from, To: m.to, Min: decodeKey(cand.Key, m.min), Bytes: m.bytes})
	}
	var jumboKeys []string
	for _, ch := range s.cl.chunks {
		if ch.jumbo && ch.bytes > w.ChunkSize {
			jumboKeys = append(jumboKeys, ch.entries[0].key)
			res.Jumbo = append(res.Jumbo, JumboChunk{Bytes: ch.bytes, Shard: ch.shard})
		}
		if ch.zone >= 0 && s.cl.zones[ch.zone].mask&(1<<ch.shard) == 0 {
			res.ZoneViolationsAtEnd++
		}
	}
	for i, k := range s.renderKeys(jumboKeys, inserted) {
		res.Jumbo[i].Key = k
	}
	// Biggest first: the report names the first one.
	slices.SortStableFunc(res.Jumbo, func(a, b JumboChunk) int { return cmp.Compare(b.Bytes, a.Bytes) })
	res.Characteristics = s.characteristics(inserted)
	return res, nil
}

// firehoseBound is the key of the next document to be inserted with MinKey
// for the other fields: the chapter's {_id: ObjectId()} at roll time.
func (s *sim) firehoseBound(d int64) string {
	return string(encodeBound(s.key, []Value{s.g.value(d, s.key.Fields[0].idx)}))
}

// target picks the document an operation addresses.
func (s *sim) target(op *Operation, inserted int64, r uint64) int64 {
	r = mix(r, 7)
	if op.Recent {
		w := min(inserted, 1000)
		return inserted - 1 - int64(r%uint64(w))
	}
	return int64(r % uint64(inserted))
}

// hits counts the shards an operation on document d contacts.
func (s *sim) hits(p *opPlan, d, inserted int64) int {
	switch {
	case p.full:
		return 1
	case p.broadcast:
		return s.cl.owningShards()
	}
	lo, hi := s.buf2[:0], []byte(nil)
	for _, f := range s.key.Fields[:p.eqPrefix] {
		v := s.g.value(d, f.idx)
		if f.Hashed {
			lo = appendHashedPart(lo, Hash64(v))
		} else {
			lo = appendKeyPart(lo, v)
		}
	}
	prefix := len(lo)
	rest := len(s.key.Fields) - p.eqPrefix
	if p.rangeOn {
		a := appendKeyPart(nil, s.g.value(d, p.rangeIdx))
		b := appendKeyPart(nil, s.g.value(min(d+p.op.Range.Span, inserted-1), p.rangeIdx))
		if string(a) > string(b) {
			a, b = b, a
		}
		lo = append(lo, a...)
		hi = append(append(hi, lo[:prefix]...), b...)
		rest--
	} else {
		hi = append(hi, lo...)
	}
	for i := 0; i < rest; i++ {
		lo = append(lo, tagMin)
		hi = append(hi, tagMax)
	}
	s.buf2 = lo
	return s.cl.shardsHit(lo, hi)
}

// renderKeys shows the values behind encoded keys (hashed ones cannot be
// decoded) by finding the first document with each key, in one pass.
func (s *sim) renderKeys(keys []string, inserted int64) []string {
	out := make([]string, len(keys))
	want := map[string][]int{}
	for i, k := range keys {
		want[k] = append(want[k], i)
	}
	var b []byte
	for d := int64(0); d < inserted && len(want) > 0; d++ {
		b = s.encodeKey(b[:0], d)
		if idx, ok := want[string(b)]; ok {
			for _, i := range idx {
				out[i] = s.keyValues(d)
			}
			delete(want, string(b))
		}
	}
	return out
}

func (s *sim) keyValues(d int64) string {
	parts := make([]string, len(s.key.Fields))
	for i, f := range s.key.Fields {
		parts[i] = f.Name + ": " + s.g.value(d, f.idx).String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// characteristics computes cardinality, frequency and monotonicity over an
// even sample of the inserted documents, like analyzeShardKey does.
func (s *sim) characteristics(inserted int64) KeyCharacteristics {
	var kc KeyCharacteristics
	if inserted == 0 {
		return kc
	}
	step := max(1, inserted/characteristicsSample)
	type rec struct {
		raw, idx entry // unhashed value; shard-key index order
		d        int64
	}
	var recs []rec
	var raw, idx []byte
	for d := int64(0); d < inserted; d += step {
		raw = raw[:0]
		for _, f := range s.key.Fields {
			raw = appendKeyPart(raw, s.g.value(d, f.idx))
		}
		idx = s.encodeKey(idx[:0], d)
		recs = append(recs, rec{raw: newEntry(raw, 0), idx: newEntry(idx, 0), d: d})
	}
	kc.SampledDocs = int64(len(recs))
	// Monotonicity: position in index order vs insertion order. Ties break
	// on insertion order, as record ids do inside an index key.
	slices.SortFunc(recs, func(a, b rec) int {
		if c := compareEntries(a.idx, b.idx); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d)
	})
	xs := make([]float64, len(recs))
	ys := make([]float64, len(recs))
	for i, r := range recs {
		xs[i], ys[i] = float64(i), float64(r.d)
	}
	kc.Monotonicity = pearson(xs, ys)
	kc.Monotonic = math.Abs(kc.Monotonicity) >= 0.7
	// Cardinality and frequency over the unhashed values.
	slices.SortFunc(recs, func(a, b rec) int {
		if c := compareEntries(a.raw, b.raw); c != 0 {
			return c
		}
		return cmp.Compare(a.d, b.d)
	})
	type run struct {
		d int64
		n int64
	}
	var runs []run
	for i, r := range recs {
		if i == 0 || r.raw.key != recs[i-1].raw.key {
			runs = append(runs, run{d: r.d})
		}
		runs[len(runs)-1].n++
	}
	kc.Distinct = int64(len(runs))
	slices.SortStableFunc(runs, func(a, b run) int { return cmp.Compare(b.n, a.n) })
	for _, r := range runs[:min(5, len(runs))] {
		kc.MostCommon = append(kc.MostCommon, ValueFreq{Value: s.keyValues(r.d), Docs: r.n})
	}
	return kc
}

func pearson(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}
