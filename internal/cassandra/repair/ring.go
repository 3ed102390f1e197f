package repair

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Endpoint is one node of the ring as system.local/system.peers describe it.
type Endpoint struct {
	Addr   string // broadcast address, as nodetool and system.peers name the node
	DC     string
	Rack   string
	Tokens []*big.Int
}

// Ring is the cluster's token ring and the keyspace's replication over it.
type Ring struct {
	Endpoints   []Endpoint
	Replication map[string]string // system_schema.keyspaces.replication
}

// Range is a token range (Start, End] and the nodes holding its replicas.
type Range struct {
	Start, End *big.Int
	Replicas   []string // addresses, sorted
}

// Murmur3Partitioner's tokens run from -2^63 (the minimum, owned by nobody) to 2^63-1.
var (
	minToken  = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 63))
	ringSpan  = new(big.Int).Lsh(big.NewInt(1), 64)
	errNoRing = errors.New("no token ring")
)

// ReadRing reads every node's tokens, data centre and rack from one node's system.local and
// system.peers (both from the same node, so no node is counted twice or missed), and the
// keyspace's replication.
func ReadRing(ctx context.Context, s *gocql.Session, keyspace string) (Ring, error) {
	var r Ring
	err := s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", keyspace).
		WithContext(ctx).Scan(&r.Replication)
	if errors.Is(err, gocql.ErrNotFound) {
		return r, fmt.Errorf("keyspace %s does not exist", keyspace)
	}
	if err != nil {
		return r, fmt.Errorf("read replication of %s: %w", keyspace, err)
	}
	var errs []error
	for _, h := range s.GetHosts() {
		if !h.IsUp() {
			continue
		}
		eps, err := readEndpoints(ctx, s, h.HostID())
		if err == nil {
			r.Endpoints = eps
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", h.ConnectAddress(), err))
	}
	return r, fmt.Errorf("read the token ring: %w", errors.Join(append(errs, errNoRing)...))
}

func readEndpoints(ctx context.Context, s *gocql.Session, host string) ([]Endpoint, error) {
	var eps []Endpoint
	read := func(stmt string) error {
		iter := s.Query(stmt).SetHostID(host).WithContext(ctx).Iter()
		var (
			addr     string
			dc, rack string
			tokens   []string
		)
		for iter.Scan(&addr, &dc, &rack, &tokens) {
			ep := Endpoint{Addr: addr, DC: dc, Rack: rack}
			for _, t := range tokens {
				v, ok := new(big.Int).SetString(t, 10)
				if !ok {
					return fmt.Errorf("node %s: token %q is not a Murmur3 token", addr, t)
				}
				ep.Tokens = append(ep.Tokens, v)
			}
			eps = append(eps, ep)
			tokens = nil
		}
		return iter.Close()
	}
	if err := read("SELECT broadcast_address, data_center, rack, tokens FROM system.local"); err != nil {
		return nil, err
	}
	if err := read("SELECT peer, data_center, rack, tokens FROM system.peers"); err != nil {
		return nil, err
	}
	return eps, nil
}

// Ranges are the ring's token ranges, each with its replicas under the keyspace's strategy
// (SimpleStrategy, or NetworkTopologyStrategy with its rack rule), in token order; the last
// wraps around the minimum token.
func (r Ring) Ranges() ([]Range, error) {
	type tok struct {
		t    *big.Int
		node int
	}
	var toks []tok
	for i, ep := range r.Endpoints {
		for _, t := range ep.Tokens {
			toks = append(toks, tok{t, i})
		}
	}
	if len(toks) == 0 {
		return nil, errNoRing
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i].t.Cmp(toks[j].t) < 0 })
	rf, err := r.replicationFactors()
	if err != nil {
		return nil, err
	}
	out := make([]Range, len(toks))
	for i := range toks {
		prev := toks[(i+len(toks)-1)%len(toks)].t
		var reps []string
		seen := map[int]bool{}
		add := func(n int) {
			if !seen[n] {
				seen[n] = true
				reps = append(reps, r.Endpoints[n].Addr)
			}
		}
		if simple, ok := rf[""]; ok {
			for k := 0; k < len(toks) && len(seen) < simple; k++ {
				add(toks[(i+k)%len(toks)].node)
			}
		} else {
			for dc, want := range rf {
				// NetworkTopologyStrategy: walking the ring from the range, take the DC's nodes
				// on racks not yet used; nodes skipped for their rack fill what is left.
				var picked, skipped []int
				racks := map[string]bool{}
				allRacks := map[string]bool{}
				for _, ep := range r.Endpoints {
					if ep.DC == dc {
						allRacks[ep.Rack] = true
					}
				}
				taken := map[int]bool{}
				for k := 0; k < len(toks) && len(picked) < want; k++ {
					n := toks[(i+k)%len(toks)].node
					ep := r.Endpoints[n]
					if ep.DC != dc || taken[n] {
						continue
					}
					taken[n] = true
					if racks[ep.Rack] && len(racks) < len(allRacks) {
						skipped = append(skipped, n)
						continue
					}
					racks[ep.Rack] = true
					picked = append(picked, n)
				}
				for _, n := range skipped {
					if len(picked) >= want {
						break
					}
					picked = append(picked, n)
				}
				for _, n := range picked {
					add(n)
				}
			}
		}
		slices.Sort(reps)
		out[i] = Range{Start: prev, End: toks[i].t, Replicas: reps}
	}
	return out, nil
}

// replicationFactors maps each DC to its replica count; SimpleStrategy's count is under "".
func (r Ring) replicationFactors() (map[string]int, error) {
	class := r.Replication["class"]
	out := map[string]int{}
	for k, v := range r.Replication {
		if k == "class" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			// 5.0's transient replication ("3/1") is not repaired by subrange full repair.
			return nil, fmt.Errorf("replication %s=%q: want a replica count", k, v)
		}
		if strings.HasSuffix(class, "SimpleStrategy") {
			out[""] = n
		} else {
			out[k] = n
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("replication %v: no replica count", r.Replication)
	}
	return out, nil
}

// Segment is a subrange of one token range: the unit of repair.
type Segment struct {
	ID         int
	Start, End string // decimal Murmur3 tokens, (Start, End]
	Replicas   []string
}

// Split cuts the ranges into about n segments, each inside one range (so each has one
// replica set): every range gets at least one, and the rest are shared in proportion to the
// ranges' sizes.
func Split(ranges []Range, n int) []Segment {
	if n < len(ranges) {
		n = len(ranges)
	}
	var segs []Segment
	for _, r := range ranges {
		size := new(big.Int).Sub(r.End, r.Start)
		if size.Sign() <= 0 { // wraps, or the only range of a one-token ring
			size.Add(size, ringSpan)
		}
		// parts = max(1, round(n * size / span))
		parts := new(big.Int).Mul(size, big.NewInt(int64(n)))
		parts.Add(parts, new(big.Int).Rsh(ringSpan, 1))
		parts.Div(parts, ringSpan)
		k := max(1, int(parts.Int64()))
		prev := r.Start
		for j := 1; j <= k; j++ {
			end := r.End
			if j < k {
				step := new(big.Int).Mul(size, big.NewInt(int64(j)))
				step.Div(step, big.NewInt(int64(k)))
				end = wrapToken(new(big.Int).Add(r.Start, step))
			}
			segs = append(segs, Segment{ID: len(segs), Start: prev.String(), End: end.String(), Replicas: r.Replicas})
			prev = end
		}
	}
	return segs
}

// wrapToken brings t back into [-2^63, 2^63).
func wrapToken(t *big.Int) *big.Int {
	if t.Cmp(new(big.Int).Add(minToken, ringSpan)) >= 0 {
		t.Sub(t, ringSpan)
	}
	return t
}
