package live

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/advise"
)

// Report is one live advice: what was read, the key characteristics, and the simulation of
// the current key and every candidate. It is also the --json document.
type Report struct {
	Collection         string               `json:"collection"`
	Sharded            bool                 `json:"sharded"`
	CurrentKey         string               `json:"currentKey,omitempty"`
	Shards             []string             `json:"shards,omitempty"`
	ChunkSizeBytes     int64                `json:"chunkSizeBytes"`
	NumDocs            int64                `json:"numDocs"`
	DataSizeBytes      int64                `json:"dataSizeBytes"`
	LiveDataShare      map[string]float64   `json:"liveDataShare,omitempty"` // per shard, from $collStats
	LatencyStats       LatencyMix           `json:"latencyStats"`
	Profile            *ProfileSample       `json:"profile,omitempty"`
	InsertionOrder     string               `json:"insertionOrder"`
	Modelled           string               `json:"modelled"`
	Scale              float64              `json:"scale"` // simulated inserts per real document
	KeyCharacteristics []KeyCharacteristics `json:"keyCharacteristics"`
	Results            []*advise.Result     `json:"results"`
	workload           *advise.Workload
	docs               []bson.Raw
}

// SampleDocs are the sampled documents the advice replayed, in its insertion order.
func (rep *Report) SampleDocs() []bson.Raw { return rep.docs }

// Advise reads ns from src, builds the workload and simulates every candidate.
func Advise(ctx context.Context, src Source, ns string, opts Options, m Model, progress io.Writer) (*Report, error) {
	r, err := Read(ctx, src, ns, opts)
	if err != nil {
		return nil, err
	}
	a, err := r.Workload(m)
	if err != nil {
		return nil, err
	}
	kcs, err := r.Characteristics(a)
	if err != nil {
		return nil, err
	}
	rep := &Report{Collection: ns, Sharded: r.Sharded, Shards: r.Shards, ChunkSizeBytes: r.ChunkSize,
		NumDocs: r.NumDocs, DataSizeBytes: r.DataSize, LatencyStats: r.Latency, Profile: r.Profile,
		InsertionOrder: r.InsertionOrder, Modelled: a.ModelledOps, Scale: a.Scale, KeyCharacteristics: kcs,
		workload: a.Workload, docs: r.Docs}
	if r.Key != nil {
		rep.CurrentKey = r.Key.String()
	}
	if r.Sharded && r.DataSize > 0 {
		rep.LiveDataShare = map[string]float64{}
		for id, f := range r.PerShard {
			rep.LiveDataShare[id] = float64(f.Size) / float64(r.DataSize)
		}
	}
	for _, cand := range a.Collection.Candidates {
		res, err := advise.SimulateCandidate(ctx, a.Workload, a.Collection, cand)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", ns, cand, err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "simulated %s %s: %d ops\n", ns, cand, res.Ops)
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// WriteText writes what was read, the characteristics under analyzeShardKey's names, then
// the advisor's table, findings and charts.
func (rep *Report) WriteText(out io.Writer) {
	fmt.Fprintf(out, "live collection %s: %d documents, %s", rep.Collection, rep.NumDocs, advise.Bytes(rep.DataSizeBytes))
	if rep.Sharded {
		fmt.Fprintf(out, ", sharded on %s over %d shards, chunk size %s\n", rep.CurrentKey, len(rep.Shards), advise.Bytes(rep.ChunkSizeBytes))
		ids := slices.Sorted(maps.Keys(rep.LiveDataShare))
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprintf("%s %.1f%%", id, 100*rep.LiveDataShare[id])
		}
		fmt.Fprintf(out, "live data share per shard: %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(out, ", not sharded (simulated on %d shards)\n", rep.workload.Shards)
	}
	ls := rep.LatencyStats
	fmt.Fprintf(out, "latencyStats since start: %d reads, %d writes, %d commands, %d transactions\n", ls.Reads, ls.Writes, ls.Commands, ls.Transactions)
	if p := rep.Profile; p != nil {
		fmt.Fprintf(out, "profiler sample (%s, %d entries, level %d restored):", p.Window, p.Entries, p.Level.Level)
		for _, op := range p.Ops {
			fmt.Fprintf(out, " %s", op.Type)
			if len(op.Filter) > 0 {
				fmt.Fprintf(out, " by %s", strings.Join(op.Filter, ","))
			}
			fmt.Fprintf(out, " ×%d;", op.Count)
		}
		fmt.Fprintln(out)
	}
	order := rep.InsertionOrder
	if order == "" {
		order = "unknown (monotonicity not judged)"
	}
	fmt.Fprintf(out, "modelled: %s; insertion order: %s\n\n", rep.Modelled, order)
	fmt.Fprintln(out, "key characteristics (analyzeShardKey's names, from the $sample):")
	for _, k := range rep.KeyCharacteristics {
		corr := "n/a"
		if c := k.Monotonicity.RecordIDCorrelationCoefficient; c != nil {
			corr = fmt.Sprintf("%.2f", *c)
		}
		fmt.Fprintf(out, "  %s: numDocsSampled %d, numDistinctValues %d, isUnique %t, monotonicity %s (%s), numDocsMissingShardKeyField %d\n",
			k.Key, k.NumDocsSampled, k.NumDistinctValues, k.IsUnique, k.Monotonicity.Type, corr, k.NumDocsMissingShardKeyField)
		var mcv []string
		for _, v := range k.MostCommonValues {
			mcv = append(mcv, fmt.Sprintf("%s ×%d", v.Value, v.Frequency))
		}
		fmt.Fprintf(out, "    mostCommonValues: %s\n", strings.Join(mcv, "; "))
	}
	fmt.Fprintln(out)
	advise.WriteTable(out, rep.workload, rep.Results)
}

// Command is the advise command line for a collection, as the monitor prints it. A password
// in uri is left out (alerts and pages are not the place for it); the user name stays.
func Command(uri, ns string) string {
	return fmt.Sprintf("shardmart advise --from %s --collection %s", shellQuote(URIWithoutPassword(uri)), shellQuote(ns))
}

// URIWithoutPassword drops ":password" from a connection string's user info. url.Parse is not
// used: a mongodb:// URI may list several host:port pairs.
func URIWithoutPassword(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	at := strings.LastIndex(rest[:hostEnd], "@")
	if at < 0 {
		return uri
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + rest[at:]
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@,=%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
