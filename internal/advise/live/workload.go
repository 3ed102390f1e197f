package live

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/sharding"
)

// Model is how a Reading becomes an advisor workload.
type Model struct {
	// Candidates are the keys compared with the current one; nil means the sharding
	// spec's alternatives for a collection of this name, else {_id: hashed} and {_id: 1}.
	Candidates []sharding.Key
	// Shards is the cluster size simulated; 0 means the cluster's shard count, or 3 for a
	// replica set.
	Shards int
	// MaxOps bounds the simulated operations per candidate (default 1,000,000); a larger
	// collection is simulated scaled down, its chunk size with it.
	MaxOps int64
	Seed   uint64
}

// Advice is the workload built from a Reading, with what it was built from.
type Advice struct {
	Workload   *advise.Workload
	Collection *advise.Collection
	// Scale is simulated inserts per real document (1 unless MaxOps scaled the run down).
	Scale float64
	// ModelledOps says where the operation mix came from.
	ModelledOps string
}

// Workload turns r into an advisor workload: the sample stretched to the collection's size
// (each sampled document standing for NumDocs/len(sample) inserts, in insertion order), the
// operation mix of the profiler sample when there is one, and the current key first among
// the candidates.
func (r *Reading) Workload(m Model) (*Advice, error) {
	if m.MaxOps == 0 {
		m.MaxOps = 1_000_000
	}
	shards := m.Shards
	switch {
	case shards > 0:
	case len(r.Shards) > 0:
		shards = len(r.Shards)
	default:
		shards = 3
	}
	cands := r.candidates(m.Candidates)
	if len(cands) == 0 {
		return nil, &Refusal{Msg: fmt.Sprintf("%s: no candidate key to compare (give --candidate)", r.NS)}
	}
	ops, insertW, totalW, how := r.operations()
	inserts := r.NumDocs
	total := int64(math.Ceil(float64(inserts) * float64(totalW) / float64(insertW)))
	scale := 1.0
	if total > m.MaxOps {
		scale = float64(m.MaxOps) / float64(total)
		total, inserts = m.MaxOps, max(1, int64(float64(inserts)*scale))
	}
	chunk := max(1, int64(float64(r.ChunkSize)*scale))
	repeat := max(1, (inserts+int64(len(r.Docs))-1)/int64(len(r.Docs)))
	// Each sampled document is replayed repeat times in a row with the same key: a run of
	// repeat × its size that no split can divide. Kept to an eighth of a chunk, so the
	// simulated chunks split as the real ones would rather than going jumbo.
	avg := max(1, r.avgSampledDocSize())
	if repeat*avg > chunk/maxRunPerChunk {
		need := (inserts*avg*maxRunPerChunk + chunk - 1) / chunk
		return nil, &Refusal{Msg: fmt.Sprintf("%s: each of the %d sampled documents would stand for %d inserts in a row (%s, over 1/%d of the %s simulated chunk): give --sample %d or more",
			r.NS, len(r.Docs), repeat, advise.Bytes(repeat*avg), maxRunPerChunk, advise.Bytes(chunk), need)}
	}
	_, coll, _ := strings.Cut(r.NS, ".")
	var y strings.Builder
	fmt.Fprintf(&y, "name: %q\ndescription: %q\nshards: %d\nchunk_size: %dB\nops: %d\nseed: %d\n",
		"live "+r.NS, "read from the live collection: "+how, shards, chunk, total, max(m.Seed, 1))
	fmt.Fprintf(&y, "collections:\n  - name: %q\n    sample: live.jsonl\n    sample_repeat: %d\n    operations:\n", coll, repeat)
	for _, op := range ops {
		fmt.Fprintf(&y, "      - {name: %q, type: %s, weight: %d", op.name, op.typ, op.weight)
		if len(op.filter) > 0 {
			fmt.Fprintf(&y, ", filter: [%s]", quoteAll(op.filter))
		}
		y.WriteString("}\n")
	}
	y.WriteString("    candidates:\n")
	for _, k := range cands {
		fmt.Fprintf(&y, "      - %s\n", flowKey(k))
	}
	var sample bytes.Buffer
	for _, d := range r.Docs {
		b, err := bson.MarshalExtJSON(d, true, false)
		if err != nil {
			return nil, fmt.Errorf("sample document of %s: %w", r.NS, err)
		}
		sample.Write(b)
		sample.WriteByte('\n')
	}
	w, err := advise.ParseWorkload([]byte(y.String()), "live "+r.NS, func(string) ([]byte, error) { return sample.Bytes(), nil })
	if err != nil {
		return nil, err
	}
	return &Advice{Workload: w, Collection: w.Collections[0], Scale: scale, ModelledOps: how}, nil
}

// maxRunPerChunk: a replayed run of one sampled document stays under 1/maxRunPerChunk of a chunk.
const maxRunPerChunk = 8

type modelOp struct {
	name, typ string
	weight    int64
	filter    []string
}

// operations is the modelled mix: inserts build the collection; the profiler sample, when
// there is one, adds its reads and writes in their observed proportions. latencyStats alone
// cannot say which fields reads filter on, so without a profile only inserts are simulated.
func (r *Reading) operations() (ops []modelOp, insertW, totalW int64, how string) {
	if r.Profile == nil || len(r.Profile.Ops) == 0 {
		return []modelOp{{name: "insert", typ: "insert", weight: 1}}, 1, 1,
			"inserts rebuilding the sampled collection; reads not simulated (their filters need --profile-seconds)"
	}
	for _, p := range r.Profile.Ops {
		filter := slices.DeleteFunc(slices.Clone(p.Filter), func(f string) bool { return !r.sampleHas(f) })
		name := p.Type
		if len(filter) > 0 {
			name += " by " + strings.Join(filter, ", ")
		}
		ops = append(ops, modelOp{name: name, typ: p.Type, weight: p.Count, filter: filter})
		totalW += p.Count
		if p.Type == "insert" {
			insertW += p.Count
		}
	}
	if insertW == 0 {
		// The window saw no insert: build the data with as many inserts as the other operations.
		insertW = totalW
		ops = append(ops, modelOp{name: "insert", typ: "insert", weight: insertW})
		totalW += insertW
	}
	return ops, insertW, totalW, fmt.Sprintf("operation mix of a %s profiler sample (%d entries)", r.Profile.Window, r.Profile.Entries)
}

// sampleHas reports whether any sampled document has the (possibly dotted) field.
func (r *Reading) sampleHas(field string) bool {
	path := strings.Split(field, ".")
	return slices.ContainsFunc(r.Docs, func(d bson.Raw) bool {
		_, err := d.LookupErr(path...)
		return err == nil
	})
}

// candidates is the current key, then the given keys or the defaults, without repeats.
func (r *Reading) candidates(given []sharding.Key) []sharding.Key {
	var out []sharding.Key
	add := func(k sharding.Key) {
		if !slices.ContainsFunc(out, func(o sharding.Key) bool { return slices.Equal(o, k) }) {
			out = append(out, k)
		}
	}
	if r.Key != nil {
		add(r.Key)
	}
	if given == nil {
		// Defaults naming a field the documents do not have would only be refused.
		_, coll, _ := strings.Cut(r.NS, ".")
		given = slices.DeleteFunc(SeedAlternatives(coll), func(k sharding.Key) bool {
			return slices.ContainsFunc(k.Names(), func(f string) bool { return !r.sampleHas(f) })
		})
	}
	for _, k := range given {
		add(k)
	}
	return out
}

// SeedAlternatives are the shard keys the sharding spec compares for a collection of this name
// (shardmart's sharding spec variants), or {_id: hashed} and {_id: 1} for another name.
func SeedAlternatives(coll string) []sharding.Key {
	var out []sharding.Key
	for _, v := range sharding.Variants()[coll] {
		spec, err := sharding.NewSpec(sharding.Options{Variants: map[string]string{coll: v}})
		if err != nil {
			continue
		}
		for _, c := range spec.Collections {
			if c.Name == coll {
				out = append(out, c.Key)
			}
		}
	}
	if out == nil {
		out = []sharding.Key{{{Name: "_id", Kind: sharding.Hashed}}, {{Name: "_id", Kind: sharding.Ascending}}}
	}
	return out
}

func flowKey(k sharding.Key) string {
	parts := make([]string, len(k))
	for i, f := range k {
		v := "1"
		switch f.Kind {
		case sharding.Hashed:
			v = "hashed"
		case sharding.Descending:
			v = "-1"
		}
		parts[i] = fmt.Sprintf("%q: %s", f.Name, v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoteAll(fs []string) string {
	q := make([]string, len(fs))
	for i, f := range fs {
		q[i] = fmt.Sprintf("%q", f)
	}
	return strings.Join(q, ", ")
}
