package robustness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is one operation as its client saw it. An operation whose outcome is not known (a
// timeout, a lost connection, a 503) has unknown set and no return time: it may have taken
// effect at any moment from its call on, or never.
type op struct {
	client    int
	key       string
	in        any
	out       any
	call, ret time.Time
	unknown   bool
}

// recorder collects the operations of one run. It holds at most maxPerKey operations per key,
// so that every history it hands the checker stays small enough to check in bounded time;
// clients reserve a slot before they act and stop acting on a key that is full.
type recorder struct {
	maxPerKey int

	mu       sync.Mutex
	start    time.Time
	ops      []op
	reserved map[string]int
	faults   []fault
	// internal are errors the API would answer 500 (httpapi.StatusOf): each one fails the run.
	internal []string
}

// internalError records an error the API would answer 500: a store's transient state that is
// not read as one, or a bug.
func (r *recorder) internalError(key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.internal = append(r.internal, key+": "+err.Error())
}

// fault is a nemesis's window, drawn on the visualisation.
type fault struct {
	name       string
	from, to   time.Time
	annotation string
}

func newRecorder(maxPerKey int) *recorder {
	return &recorder{maxPerKey: maxPerKey, start: time.Now(), reserved: map[string]int{}}
}

// reserve takes one of key's slots, keeping the last for the final read; false means the
// key's history is full.
func (r *recorder) reserve(key string) bool { return r.take(key, r.maxPerKey-1) }

// reserveLast takes key's last slot: the final read after the heal.
func (r *recorder) reserveLast(key string) bool { return r.take(key, r.maxPerKey) }

func (r *recorder) take(key string, limit int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved[key] >= limit {
		return false
	}
	r.reserved[key]++
	return true
}

// full reports whether every one of keys is full for the clients.
func (r *recorder) full(keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if r.reserved[k] < r.maxPerKey-1 {
			return false
		}
	}
	return true
}

func (r *recorder) add(o op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) addFault(f fault) {
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}

// byKey is the history, one slice per key, each in call order.
func (r *recorder) byKey() map[string][]op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]op{}
	for _, o := range r.ops {
		out[o.key] = append(out[o.key], o)
	}
	for _, ops := range out {
		slices.SortStableFunc(ops, func(a, b op) int { return a.call.Compare(b.call) })
	}
	return out
}

// counts is how many operations were recorded, and how many of them have an unknown outcome.
func (r *recorder) counts() (all, unknown int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.ops {
		if o.unknown {
			unknown++
		}
	}
	return len(r.ops), unknown
}

// verdict is the outcome of checking one key's history.
type verdict struct {
	key     string
	ops     int
	result  porcupine.CheckResult
	info    porcupine.LinearizationInfo
	took    time.Duration
	timeout time.Duration
}

// check runs porcupine over one key's operations with model. An unknown operation returns
// after every known one (at the end of the history), so that the checker may place its effect
// anywhere from its call on; the model decides what "unknown" allows.
func check(model porcupine.Model, key string, ops []op, start time.Time, timeout time.Duration) verdict {
	end := start
	for _, o := range ops {
		if !o.unknown && o.ret.After(end) {
			end = o.ret
		}
		if o.call.After(end) {
			end = o.call
		}
	}
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		ret := end.Add(time.Second)
		if !o.unknown {
			ret = o.ret
		}
		hist = append(hist, porcupine.Operation{ClientId: o.client, Input: o.in, Output: o.out,
			Call: o.call.Sub(start).Nanoseconds(), Return: ret.Sub(start).Nanoseconds()})
	}
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	return verdict{key: key, ops: len(ops), result: res, info: info, took: time.Since(began), timeout: timeout}
}

// err is nil only for a history porcupine proved linearizable: Illegal fails, and so does
// Unknown, which means the checker ran out of time and proved nothing.
func (v verdict) err() error {
	switch v.result {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("key %s: the linearizability check timed out after %s on %d operations: no verdict, not a pass", v.key, v.timeout, v.ops)
	default:
		return fmt.Errorf("key %s: history of %d operations is not linearizable", v.key, v.ops)
	}
}

// checkAll checks every key's history with model and fails t for each key that is not proved
// linearizable, writing that key's history as porcupine's HTML visualisation (with the faults
// drawn in) into outDir(t). It returns how many keys and operations were checked.
func checkAll(t *testing.T, name string, r *recorder, model porcupine.Model, timeout time.Duration) (keys, ops int) {
	t.Helper()
	hist := r.byKey()
	names := make([]string, 0, len(hist))
	for k := range hist {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := check(model, k, hist[k], r.start, timeout)
		keys++
		ops += v.ops
		if err := v.err(); err != nil {
			t.Errorf("%s: %v; visualisation: %s", name, err, writeVisualisation(t, name, model, v, r))
		}
	}
	return keys, ops
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// writeVisualisation writes v's history as HTML and returns its path (or why it could not).
func writeVisualisation(t *testing.T, name string, model porcupine.Model, v verdict, r *recorder) string {
	t.Helper()
	dir, err := outDir()
	if err != nil {
		return err.Error()
	}
	r.mu.Lock()
	var ann []porcupine.Annotation
	for _, f := range r.faults {
		ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: f.from.Sub(r.start).Nanoseconds(), End: f.to.Sub(r.start).Nanoseconds(),
			Description: f.name, Details: f.annotation, BackgroundColor: "#f8d0d0"})
	}
	r.mu.Unlock()
	v.info.AddAnnotations(ann)
	path := filepath.Join(dir, unsafeName.ReplaceAllString(t.Name()+"-"+name+"-"+v.key, "_")+".html")
	if err := porcupine.VisualizePath(model, v.info, path); err != nil {
		return fmt.Sprintf("writing %s: %v", path, err)
	}
	txt, err := writeText(dir, t.Name()+"-"+name+"-"+v.key, r.byKey()[v.key], r)
	if err != nil {
		return fmt.Sprintf("%s (%v)", path, err)
	}
	return path + " (text: " + txt + ")"
}

// writeText writes ops as text, one operation a line in call order, after r's faults, for
// grep and for the docs, and returns the file's path.
func writeText(dir, name string, ops []op, r *recorder) (string, error) {
	slices.SortStableFunc(ops, func(a, b op) int { return a.call.Compare(b.call) })
	var b strings.Builder
	r.mu.Lock()
	for _, f := range r.faults {
		fmt.Fprintf(&b, "nemesis %s: +%s .. +%s\n", f.annotation, f.from.Sub(r.start), f.to.Sub(r.start))
	}
	r.mu.Unlock()
	for _, o := range ops {
		ret := "?"
		if !o.unknown {
			ret = "+" + o.ret.Sub(r.start).String()
		}
		fmt.Fprintf(&b, "client %d +%s .. %s %s → %s\n", o.client, o.call.Sub(r.start), ret, describeInput(o.in), o.out.(result))
	}
	path := filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

var (
	outOnce sync.Once
	outPath string
	outErr  error
)

// outDir is where failing histories go: $SHARDMART_ROBUSTNESS_OUT, or a temporary directory
// made on the first failure and kept (t.TempDir would delete the evidence with the test).
func outDir() (string, error) {
	outOnce.Do(func() {
		if d := os.Getenv("SHARDMART_ROBUSTNESS_OUT"); d != "" {
			outPath, outErr = d, os.MkdirAll(d, 0o755)
			return
		}
		outPath, outErr = os.MkdirTemp("", "shardmart-robustness-")
	})
	return outPath, outErr
}
