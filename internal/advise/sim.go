package advise

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

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

// SimulateCandidate runs one collection under one candidate key. Every
// candidate sees the same operation stream for a given seed.
func SimulateCandidate(ctx context.Context, w *Workload, c *Collection, cand Candidate) (*Result, error) {
	s, err := newSim(w, c, cand)
	if err != nil {
		return nil, err
	}
	for tick := 0; tick < s.res.Ticks; tick++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.tick(tick)
	}
	return s.result(), nil
}

// sim is the state of one candidate's run.
type sim struct {
	w        *Workload
	c        *Collection
	cand     Candidate
	key      sharding.Key
	keyIdx   []int // the key's fields in c.Fields
	g        *docGen
	cl       *cluster
	plans    []opPlan
	opCDF    []float64 // picks the next operation by weight
	firehose int       // the zone rolled daily, -1 for none
	rng      uint64
	inserted int64
	res      *Result // filled in as the run goes
	buf      []byte
	buf2     []byte
}

// newSim sets a candidate's run up: the generator paced so inserts span the
// simulated days, the empty collection's chunks, its zones and the plans.
func newSim(w *Workload, c *Collection, cand Candidate) (*sim, error) {
	if err := c.checkKey(cand.Key); err != nil {
		return nil, fmt.Errorf("collection %s: %w", c.Name, err)
	}
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
	expectedInserts := max(1, w.Ops*int64(insertW)/int64(totalW))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	s := &sim{w: w, c: c, cand: cand, key: cand.Key, keyIdx: c.keyIndexes(cand.Key),
		g:        newDocGen(c, w.Seed, t0, float64(w.span().Milliseconds())/float64(expectedInserts)),
		cl:       newCluster(w.Shards, w.ChunkSize),
		firehose: -1,
		rng:      mix(w.Seed, 0x5eed),
		res:      newResult(w, c, cand)}
	s.cl.initChunks(cand.Key)
	if err := s.setZones(); err != nil {
		return nil, fmt.Errorf("collection %s: %w", c.Name, err)
	}
	s.plans = make([]opPlan, len(c.Operations))
	weights := make([]float64, len(c.Operations))
	for i := range c.Operations {
		s.plans[i] = planOp(&c.Operations[i], cand.Key, c)
		weights[i] = float64(c.Operations[i].Weight)
	}
	s.opCDF = cumulative(weights)
	return s, nil
}

// setZones defines the candidate's zones before the first insert, as zones
// defined before shardCollection are, and places their chunks.
func (s *sim) setZones() error {
	for zi, z := range s.cand.Zones {
		zs := zoneState{name: z.Name, firehose: z.Firehose}
		for _, sh := range z.Shards {
			zs.mask |= 1 << sh
		}
		for _, r := range z.Ranges {
			zs.ranges = append(zs.ranges, [2]string{boundKey(s.key, r.Min), boundKey(s.key, r.Max)})
		}
		if z.Firehose {
			if z.Roll {
				s.firehose = zi
			}
			zs.ranges = [][2]string{{s.firehoseBound(0), keyMax}}
		}
		s.cl.zones = append(s.cl.zones, zs)
	}
	if err := checkOverlap(s.cand, s.cl.zones); err != nil {
		return err
	}
	s.cl.applyZones()
	s.cl.placeZones()
	return nil
}

// newResult is the result before the run: what was simulated, and a
// counter per operation.
func newResult(w *Workload, c *Collection, cand Candidate) *Result {
	ticks := w.ticks()
	res := &Result{Collection: c.Name, Key: cand.Key, Shards: w.Shards, Ticks: ticks,
		TickLength: w.span() / time.Duration(ticks), ChunkSize: w.ChunkSize, FirstMoveTick: -1,
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
	res.OpStats = make([]OpStat, len(c.Operations))
	for i, op := range c.Operations {
		res.OpStats[i] = OpStat{Name: op.Name, Type: op.Type}
	}
	return res
}

// tick runs tick t's share of the operations, then the balancer, records
// the tick's data and writes per shard, and rolls the firehose at day end.
func (s *sim) tick(t int) {
	w := s.w
	writes := make([]int64, w.Shards)
	ticks := int64(s.res.Ticks)
	n := w.Ops*int64(t+1)/ticks - w.Ops*int64(t)/ticks
	for j := int64(0); j < n; j++ {
		s.rng = mix(s.rng, uint64(j))
		pi := pick(s.opCDF, unit(s.rng))
		if s.plans[pi].op.Type == OpInsert {
			s.insert(&s.res.OpStats[pi], writes)
		} else {
			s.address(&s.plans[pi], &s.res.OpStats[pi], writes)
		}
	}
	if w.Balancer.Enabled {
		s.cl.tick = t
		if s.cl.balance(w.Balancer.RoundsPerTick) > 0 && s.res.FirstMoveTick < 0 {
			s.res.FirstMoveTick = t
		}
	}
	s.res.Data = append(s.res.Data, slices.Clone(s.cl.shardBytes))
	s.res.Writes = append(s.res.Writes, writes)
	if s.firehose >= 0 && (t+1)%w.TicksPerDay == 0 {
		// The daily job of the chapter: the zone now starts at the current
		// key value, so yesterday's chunks may leave the firehose shard.
		s.cl.zones[s.firehose].ranges[0][0] = s.firehoseBound(s.inserted)
		s.cl.applyZones()
	}
}

// insert stores the next document in the chunk its key falls in.
func (s *sim) insert(st *OpStat, writes []int64) {
	d := s.inserted
	s.inserted++
	s.buf = s.encodeKey(s.buf[:0], d)
	ci := s.cl.find(s.buf)
	sh := s.cl.chunks[ci].shard
	if ci == len(s.cl.chunks)-1 {
		s.res.TopChunkInserts++
	}
	if s.res.FirstMoveTick < 0 {
		s.res.InsertsBeforeMove[sh]++
	}
	s.cl.insert(ci, s.buf, s.docSize(d))
	writes[sh]++
	st.Count++
	st.SingleShard++
	st.ShardsHit++
}

// address runs a find, update or delete on an existing document, counting
// the shards its filter contacts.
func (s *sim) address(p *opPlan, st *OpStat, writes []int64) {
	if s.inserted == 0 {
		// Nothing to address yet: not counted in the distribution.
		return
	}
	st.Count++
	d := s.target(p.op, s.inserted, s.rng)
	hit := s.hits(p, d, s.inserted)
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
		// The write happens where the document lives, whichever shards the
		// filter had to ask.
		s.buf = s.encodeKey(s.buf[:0], d)
		ci := s.cl.find(s.buf)
		writes[s.cl.chunks[ci].shard]++
		if p.op.Type == OpDelete {
			s.cl.remove(ci, s.docSize(d))
		}
	}
}

// result completes the run's result from the cluster's final state.
func (s *sim) result() *Result {
	res := s.res
	res.Ops = s.w.Ops
	res.Inserts = s.inserted
	res.ChunkMoves = s.cl.chunkMoves
	res.MovedBytes = s.cl.movedBytes
	res.Chunks = len(s.cl.chunks)
	res.ChunksPerShard = slices.Clone(s.cl.shardChunks)
	res.SampleRepeats = s.c.Sample != nil && s.inserted > int64(len(s.c.Sample))*max(s.c.SampleRepeat, 1)
	for _, m := range s.cl.moves {
		res.Moves = append(res.Moves, ChunkMove{Tick: m.tick, From: m.from, To: m.to, Min: decodeKey(s.key, m.min), Bytes: m.bytes})
	}
	res.Jumbo = s.jumbo()
	res.ZoneViolationsAtEnd = s.cl.zoneViolations()
	res.Characteristics = s.characteristics(s.inserted)
	return res
}

// jumbo lists the jumbo chunks above the chunk size, biggest first: the
// report names the first one.
func (s *sim) jumbo() []JumboChunk {
	var out []JumboChunk
	var keys []string
	for _, ch := range s.cl.chunks {
		if ch.jumbo && ch.bytes > s.w.ChunkSize {
			keys = append(keys, ch.entries[0].key)
			out = append(out, JumboChunk{Bytes: ch.bytes, Shard: ch.shard})
		}
	}
	for i, k := range s.renderKeys(keys, s.inserted) {
		out[i].Key = k
	}
	slices.SortStableFunc(out, func(a, b JumboChunk) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// encodeKey appends document d's shard-key value (hashed where the key says).
func (s *sim) encodeKey(dst []byte, d int64) []byte {
	return s.encodePrefix(dst, d, len(s.key))
}

// encodePrefix appends the first n fields of document d's shard-key value.
func (s *sim) encodePrefix(dst []byte, d int64, n int) []byte {
	for i, f := range s.key[:n] {
		v := s.g.value(d, s.keyIdx[i])
		if f.Kind == sharding.Hashed {
			dst = appendHashedPart(dst, Hash64(v))
		} else {
			dst = appendKeyPart(dst, v)
		}
	}
	return dst
}

func (s *sim) docSize(d int64) uint32 {
	if s.c.Sample != nil {
		return uint32(s.c.sampleAt(d).size)
	}
	return uint32(s.c.DocBytes)
}

// encodeBound encodes a zone bound: given values, then MinKey for the rest.
// A hashed field's bound is the hash value itself.
func encodeBound(k sharding.Key, vals []Value) []byte {
	var b []byte
	for i, f := range k {
		switch {
		case i >= len(vals):
			b = append(b, tagMin)
		case f.Kind == sharding.Hashed && vals[i].Kind == KindInt:
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
			return fmt.Errorf("%s: zone ranges of %s and %s overlap", cand, all[i-1].zone, all[i].zone)
		}
	}
	return nil
}

// boundKey is encodeBound as a chunk-bound string; the all-MinKey bound is
// the collection's lowest bound "" and the all-MaxKey bound is keyMax.
func boundKey(k sharding.Key, vals []Value) string {
	b := string(encodeBound(k, vals))
	if strings.Trim(b, string(rune(tagMin))) == "" {
		return ""
	}
	if strings.Trim(b, "\x81") == "" {
		return keyMax
	}
	return b
}

// firehoseBound is the key of the next document to be inserted with MinKey
// for the other fields: the chapter's {_id: ObjectId()} at roll time.
func (s *sim) firehoseBound(d int64) string {
	return string(encodeBound(s.key, []Value{s.g.value(d, s.keyIdx[0])}))
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
	parts := make([]string, len(s.key))
	for i, f := range s.key {
		parts[i] = f.Name + ": " + s.g.value(d, s.keyIdx[i]).String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
