package advise

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Workload is a decoded workload file: the cluster to simulate and, per
// collection, its documents, operation mix and candidate shard keys.
type Workload struct {
	Name        string
	Description string
	Shards      int
	ChunkSize   int64 // bytes
	Ops         int64 // simulated operations per collection and candidate
	Days        int
	TicksPerDay int
	Seed        uint64
	Balancer    BalancerConfig
	Collections []*Collection
}

// ticks is how many ticks the simulation runs.
func (w *Workload) ticks() int { return w.Days * w.TicksPerDay }

// span is the simulated time.
func (w *Workload) span() time.Duration { return time.Duration(w.Days) * 24 * time.Hour }

// BalancerConfig says whether and how often the simulated balancer runs.
type BalancerConfig struct {
	Enabled bool
	// RoundsPerTick bounds chunk moves per simulated tick; a shard takes part in
	// at most one chunk move per round, as in MongoDB.
	RoundsPerTick int
}

// Collection is one collection of the workload.
type Collection struct {
	Name       string
	DocBytes   int
	Fields     []*Field
	Sample     []sampleDoc // real documents replayed instead of generators
	SampleFile string
	// SampleRepeat > 1 makes each sample document stand for that many consecutive inserts,
	// so a sample of a large collection keeps its insertion order when stretched to the
	// collection's size (cycling through it would restart an ascending key at its lowest value).
	SampleRepeat int64
	Candidates   []Candidate
	Operations   []Operation
	fieldIdx     map[string]int
}

// Candidate is a shard key to evaluate, with optional zones. The key is
// sharding's model, so a spec collection's key is simulated as apply sets it.
type Candidate struct {
	Key   sharding.Key
	Zones []Zone
	Line  int
}

// String is the key as workload files write it.
func (c Candidate) String() string { return keyPattern(c.Key) }

// Zone pins key ranges to a set of shards (sh.addShardToZone +
// sh.updateZoneKeyRange). A firehose zone covers [now, MaxKey) on the first
// key field and is rolled forward once a simulated day.
type Zone struct {
	Name     string
	Shards   []int
	Ranges   []ZoneRange
	Firehose bool
	Roll     bool // firehose only: roll the lower bound daily (default true)
}

// ZoneRange is [Min, Max) in shard-key values; missing trailing fields are
// MinKey, as MongoDB requires the whole key prefix.
type ZoneRange struct {
	Min, Max []Value
}

// OpType is the kind of a declared operation.
type OpType uint8

// Operation types.
const (
	OpInsert OpType = iota
	OpFind
	OpUpdate
	OpDelete
)

// Operation is one entry of the operation mix. Non-insert operations address
// an existing document through equality on Filter fields and optionally a
// range on Range.Field spanning Range.Span documents.
type Operation struct {
	Name   string
	Type   OpType
	Weight int
	Filter []string
	Range  *RangeFilter
	Recent bool // address one of the last 1000 inserted documents
}

// RangeFilter is a range predicate from one document's value to the value of
// the document inserted Span inserts later.
type RangeFilter struct {
	Field string
	Span  int64
}

// InputError names the file, line and field at fault.
type InputError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		return loc + ": " + e.Field + ": " + e.Msg
	}
	return loc + ": " + e.Msg
}

// LoadWorkload reads and validates a workload file; sample files are resolved
// relative to it.
func LoadWorkload(path string) (*Workload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	return ParseWorkload(data, path, func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(path), name)
		}
		return os.ReadFile(name)
	})
}

// sampleAt is the sample document insert d replays.
func (c *Collection) sampleAt(d int64) *sampleDoc {
	return &c.Sample[(d/max(c.SampleRepeat, 1))%int64(len(c.Sample))]
}

func (c *Collection) fieldNames() string {
	names := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func (c *Collection) addField(f *Field) {
	c.fieldIdx[f.Name] = len(c.Fields)
	c.Fields = append(c.Fields, f)
}

// SetShards overrides the shard count, refusing zones that name shards the
// smaller cluster would not have.
func (w *Workload) SetShards(n int) error {
	if n < 1 || n > 64 {
		return fmt.Errorf("shards: want 1 to 64, got %d", n)
	}
	for _, c := range w.Collections {
		for _, cand := range c.Candidates {
			for _, z := range cand.Zones {
				for _, s := range z.Shards {
					if s >= n {
						return fmt.Errorf("shards %d: zone %s of %s %s uses shard %d", n, z.Name, c.Name, cand, s)
					}
				}
			}
		}
	}
	w.Shards = n
	return nil
}
