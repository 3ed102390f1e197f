package advise

import (
	"cmp"
	"math"
	"slices"
)

// characteristicsSample bounds the documents characteristics reads.
const characteristicsSample = 25_000

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
		for _, fi := range s.keyIdx {
			raw = appendKeyPart(raw, s.g.value(d, fi))
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

// SampleCharacteristics computes cand's characteristics over c's sample documents, each
// once, in sample order (which stands for insertion order in the monotonicity figure), and
// counts the documents missing a key field (MongoDB keys them as null).
func SampleCharacteristics(w *Workload, c *Collection, cand Candidate) (KeyCharacteristics, int64, error) {
	once := *c
	once.SampleRepeat = 1
	s, err := newSim(w, &once, cand)
	if err != nil {
		return KeyCharacteristics{}, 0, err
	}
	var missing int64
	for _, d := range c.Sample {
		for _, fi := range s.keyIdx {
			if d.vals[fi].Kind == KindMissing {
				missing++
				break
			}
		}
	}
	return s.characteristics(int64(len(c.Sample))), missing, nil
}
