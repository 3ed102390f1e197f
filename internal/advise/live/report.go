package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

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

// Command is the advise command line for a collection, as the monitor prints it. The URI is
// printed without its password and secret options (alerts and pages are not the place for
// them); one that does not parse is printed as MONGOS_URI, never as given.
func Command(uri, ns string) string {
	clean, err := URIWithoutPassword(uri)
	if err != nil {
		clean = "MONGOS_URI"
	}
	return fmt.Sprintf("shardmart advise --from %s --collection %s", shellQuote(clean), shellQuote(ns))
}

// secretOptions are the connection-string options whose values are secrets.
var secretOptions = []string{"tlscertificatekeyfilepassword", "sslclientcertificatekeypassword", "proxypassword"}

// URIWithoutPassword is uri without the password of its user info, without the secret options
// and without AWS_SESSION_TOKEN in authMechanismProperties; the user name stays. uri must parse
// as the driver parses it (the driver's connstring, without the DNS lookups of mongodb+srv),
// and the split below follows the driver's: user info ends at the first '@'.
func URIWithoutPassword(uri string) (string, error) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", errors.New(`not a MongoDB connection string: want mongodb:// or mongodb+srv://`)
	}
	check := uri
	if scheme == connstring.SchemeMongoDBSRV {
		// Parsing mongodb+srv looks the host up in DNS; the syntax is the same as mongodb://
		// with one host and no port.
		check = connstring.SchemeMongoDB + "://" + rest
	}
	cs, err := connstring.ParseAndValidate(check)
	if err != nil {
		if strings.Contains(err.Error(), "password") {
			// The driver's message may quote part of the password.
			return "", errors.New("not a MongoDB connection string: the password is not validly escaped")
		}
		return "", fmt.Errorf("not a MongoDB connection string: %w", err)
	}
	if scheme == connstring.SchemeMongoDBSRV && (len(cs.Hosts) != 1 || strings.Contains(cs.Hosts[0], ":")) {
		return "", errors.New("not a MongoDB connection string: mongodb+srv:// takes one host name without a port")
	}
	if user, hosts, ok := strings.Cut(rest, "@"); ok {
		name, _, _ := strings.Cut(user, ":")
		rest = name + "@" + hosts
	}
	head, query, ok := strings.Cut(rest, "?")
	if !ok {
		return scheme + "://" + head, nil
	}
	var kept []string
	for _, opt := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(opt, "=")
		switch lk := strings.ToLower(k); {
		case slices.Contains(secretOptions, lk):
			continue
		case lk == "authmechanismproperties":
			v = withoutSessionToken(v)
			if v == "" {
				continue
			}
			opt = k + "=" + v
		}
		kept = append(kept, opt)
	}
	if len(kept) == 0 {
		return scheme + "://" + head, nil
	}
	return scheme + "://" + head + "?" + strings.Join(kept, "&"), nil
}

// withoutSessionToken drops AWS_SESSION_TOKEN from an authMechanismProperties value
// ("K1:V1,K2:V2", possibly escaped).
func withoutSessionToken(v string) string {
	unescaped, err := url.QueryUnescape(v)
	if err != nil {
		return ""
	}
	all := strings.Split(unescaped, ",")
	props := slices.DeleteFunc(slices.Clone(all), func(p string) bool {
		k, _, _ := strings.Cut(p, ":")
		return strings.EqualFold(k, "AWS_SESSION_TOKEN")
	})
	switch len(props) {
	case 0:
		return ""
	case len(all):
		return v
	}
	return url.QueryEscape(strings.Join(props, ","))
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
