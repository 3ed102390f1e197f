package cassandracollect

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"sort"
	"strconv"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

var ownershipDesc = prometheus.NewDesc("shardmart_cassandra_token_ownership_ratio",
	"share of the token ring the node holds a replica of, per keyspace (nodetool status <keyspace> \"Owns (effective)\")",
	[]string{"node", "keyspace"}, nil)

// ownershipCollector computes each node's effective ownership per keyspace from CQL alone:
// the ring (system.local and system.peers_v2 tokens, data centres and racks, as this node
// sees them) and each keyspace's replication (system_schema.keyspaces), placed the way
// SimpleStrategy and NetworkTopologyStrategy place replicas. nodetool status computes the
// same from the same state but needs JMX, which a remote exporter rarely reaches. Keyspaces
// with LocalStrategy (system, system_schema) or an unknown strategy are left out.
type ownershipCollector struct{ nodes []*node }

func (c *ownershipCollector) Name() string { return "cassandra_ownership" }

func (c *ownershipCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, s *gocql.Session) error {
		r, self, err := readRing(ctx, s)
		if err != nil {
			return err
		}
		iter := s.Query("SELECT keyspace_name, replication FROM system_schema.keyspaces").IterContext(ctx)
		var ks string
		for {
			var repl map[string]string // fresh per row: Scan merges into a non-nil map
			if !iter.Scan(&ks, &repl) {
				break
			}
			strategy, ok := parseReplication(repl)
			if !ok {
				continue
			}
			own := r.ownership(strategy)
			ch <- prometheus.MustNewConstMetric(ownershipDesc, prometheus.GaugeValue, own[self], n.label, ks)
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read system_schema.keyspaces: %w", err)
		}
		return nil
	})
}

// endpoint is one node of the ring.
type endpoint struct {
	addr, dc, rack string
}

// ring is the token ring: tokens sorted, each with its owner.
type ring struct {
	tokens []*big.Int
	owners []endpoint
	span   *big.Int // number of tokens in the partitioner's range
}

var (
	murmur3Span = new(big.Int).Lsh(big.NewInt(1), 64)
	randomSpan  = new(big.Int).Lsh(big.NewInt(1), 127)
)

// readRing reads the ring as node s sees it, and that node's own address.
func readRing(ctx context.Context, s *gocql.Session) (*ring, string, error) {
	var partitioner, dc, rack string
	var addr net.IP
	var tokens []string
	err := s.Query("SELECT partitioner, broadcast_address, data_center, rack, tokens FROM system.local").
		ScanContext(ctx, &partitioner, &addr, &dc, &rack, &tokens)
	if err != nil {
		return nil, "", fmt.Errorf("read system.local: %w", err)
	}
	r := &ring{}
	switch partitioner {
	case "org.apache.cassandra.dht.Murmur3Partitioner":
		r.span = murmur3Span
	case "org.apache.cassandra.dht.RandomPartitioner":
		r.span = randomSpan
	default:
		return nil, "", fmt.Errorf("token ownership: partitioner %s is not supported", partitioner)
	}
	self := addr.String()
	byToken := map[string]endpoint{}
	add := func(e endpoint, toks []string) {
		for _, t := range toks {
			byToken[t] = e
		}
	}
	add(endpoint{self, dc, rack}, tokens)
	iter := s.Query("SELECT peer, data_center, rack, tokens FROM system.peers_v2").IterContext(ctx)
	var peer net.IP
	var pdc, prack string
	var ptokens []string
	for iter.Scan(&peer, &pdc, &prack, &ptokens) {
		add(endpoint{peer.String(), pdc, prack}, ptokens)
		ptokens = nil
	}
	if err := iter.Close(); err != nil {
		return nil, "", fmt.Errorf("read system.peers_v2: %w", err)
	}
	for t, e := range byToken {
		v, ok := new(big.Int).SetString(t, 10)
		if !ok {
			return nil, "", fmt.Errorf("token ownership: token %q of %s is not an integer", t, e.addr)
		}
		r.tokens = append(r.tokens, v)
		r.owners = append(r.owners, e)
	}
	sort.Sort(byTokenOrder{r})
	if len(r.tokens) == 0 {
		return nil, "", fmt.Errorf("token ownership: the node reports no tokens")
	}
	return r, self, nil
}

type byTokenOrder struct{ r *ring }

func (b byTokenOrder) Len() int           { return len(b.r.tokens) }
func (b byTokenOrder) Less(i, j int) bool { return b.r.tokens[i].Cmp(b.r.tokens[j]) < 0 }
func (b byTokenOrder) Swap(i, j int) {
	b.r.tokens[i], b.r.tokens[j] = b.r.tokens[j], b.r.tokens[i]
	b.r.owners[i], b.r.owners[j] = b.r.owners[j], b.r.owners[i]
}

// strategy is a keyspace's replication: SimpleStrategy has one factor under the key "",
// NetworkTopologyStrategy one per data centre.
type strategy map[string]int

// parseReplication reads system_schema.keyspaces.replication; ok is false for strategies
// that place no ring replicas (LocalStrategy) or that are unknown here.
func parseReplication(repl map[string]string) (strategy, bool) {
	class := repl["class"]
	class = class[strings.LastIndexByte(class, '.')+1:]
	// "3/1" is 3 replicas of which 1 transient: a transient replica still owns the range.
	factor := func(v string) int {
		v, _, _ = strings.Cut(v, "/")
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		return n
	}
	switch class {
	case "SimpleStrategy":
		return strategy{"": factor(repl["replication_factor"])}, true
	case "NetworkTopologyStrategy":
		st := strategy{}
		for k, v := range repl {
			if k != "class" {
				st[k] = factor(v)
			}
		}
		return st, true
	}
	return nil, false
}

// ownership returns each endpoint's share of the ring it holds a replica of.
func (r *ring) ownership(st strategy) map[string]float64 {
	held := map[string]*big.Int{}
	n := len(r.tokens)
	for i := range r.tokens {
		// Range (tokens[i-1], tokens[i]]; a lone token owns the whole ring.
		width := new(big.Int).Set(r.span)
		if n > 1 {
			width.Sub(r.tokens[i], r.tokens[(i-1+n)%n])
			width.Mod(width, r.span)
		}
		for _, ep := range r.replicas(i, st) {
			if held[ep] == nil {
				held[ep] = new(big.Int)
			}
			held[ep].Add(held[ep], width)
		}
	}
	out := map[string]float64{}
	span := new(big.Float).SetInt(r.span)
	for ep, w := range held {
		f, _ := new(big.Float).Quo(new(big.Float).SetInt(w), span).Float64()
		out[ep] = f
	}
	return out
}

// replicas walks the ring clockwise from token i, as Cassandra does: SimpleStrategy takes
// the first rf distinct nodes; NetworkTopologyStrategy takes, per data centre, nodes of new
// racks first and repeats a rack only as far as the DC has fewer racks than its factor.
func (r *ring) replicas(i int, st strategy) []string {
	n := len(r.tokens)
	if rf, ok := st[""]; ok {
		var out []string
		seen := map[string]bool{}
		for k := 0; k < n && len(out) < rf; k++ {
			ep := r.owners[(i+k)%n].addr
			if !seen[ep] {
				seen[ep] = true
				out = append(out, ep)
			}
		}
		return out
	}
	type dcState struct {
		left, rackRepeats int
		racks             map[string]bool
	}
	dcNodes, dcRacks := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, e := range r.owners {
		if dcNodes[e.dc] == nil {
			dcNodes[e.dc], dcRacks[e.dc] = map[string]bool{}, map[string]bool{}
		}
		dcNodes[e.dc][e.addr] = true
		dcRacks[e.dc][e.rack] = true
	}
	dcs := map[string]*dcState{}
	for dc, rf := range st {
		if rf <= 0 || len(dcNodes[dc]) == 0 {
			continue
		}
		dcs[dc] = &dcState{left: min(rf, len(dcNodes[dc])), rackRepeats: rf - len(dcRacks[dc]), racks: map[string]bool{}}
	}
	var out []string
	chosen := map[string]bool{}
	for k := 0; k < n; k++ {
		e := r.owners[(i+k)%n]
		d := dcs[e.dc]
		if d == nil || d.left == 0 || chosen[e.addr] {
			continue
		}
		if !d.racks[e.rack] {
			d.racks[e.rack] = true
		} else if d.rackRepeats > 0 {
			d.rackRepeats--
		} else {
			continue
		}
		d.left--
		chosen[e.addr] = true
		out = append(out, e.addr)
	}
	return out
}
