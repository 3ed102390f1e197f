package advise

import "github.com/shardmart/shardmart/internal/sharding"

// opPlan is an operation with its targeting against one shard key resolved.
type opPlan struct {
	op        *Operation
	eqPrefix  int  // leading key fields given by equality
	rangeOn   bool // the range filter is on key field eqPrefix (not hashed)
	full      bool // the whole key is given: exactly one chunk
	broadcast bool
	rangeIdx  int
}

func planOp(op *Operation, k sharding.Key, c *Collection) opPlan {
	p := opPlan{op: op, rangeIdx: -1}
	eq := map[string]bool{}
	for _, f := range op.Filter {
		eq[f] = true
	}
	for _, f := range k {
		if !eq[f.Name] {
			break
		}
		p.eqPrefix++
	}
	p.full = p.eqPrefix == len(k)
	if op.Range != nil && !p.full {
		kf := k[p.eqPrefix]
		if kf.Name == op.Range.Field && kf.Kind != sharding.Hashed {
			p.rangeOn = true
			p.rangeIdx = c.fieldIdx[op.Range.Field]
		}
	}
	p.broadcast = p.eqPrefix == 0 && !p.rangeOn
	return p
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
	lo, hi := s.encodePrefix(s.buf2[:0], d, p.eqPrefix), []byte(nil)
	prefix := len(lo)
	rest := len(s.key) - p.eqPrefix
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
