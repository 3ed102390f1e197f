package monitor

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ErrCollectorsFailed is returned by WriteSummary after the table when a collector failed, so
// a script running --once sees a non-zero exit.
var ErrCollectorsFailed = errors.New("monitor: some collectors failed (named above; the log says why)")

// series indexes one gather by metric name; each sample keeps its labels.
type series map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func index(mfs []*dto.MetricFamily) series {
	out := series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				s.value = m.GetUntyped().GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// WriteSummary prints the --once report from one gather of the registry: collectors that
// failed, shards that are down, then per collection each shard's data, share and chunks, the
// hot shards (Judge) and what to do about each; then the Cassandra nodes the same way.
func WriteSummary(w io.Writer, mfs []*dto.MetricFamily, floorBytes float64) error {
	r := BuildReport(mfs, floorBytes)
	if len(r.Failed) > 0 {
		fmt.Fprintf(w, "collectors failed: %s\n", strings.Join(r.Failed, ", "))
	}
	if m := r.Mongo; m != nil {
		fmt.Fprintf(w, "MongoDB: shards up: %s; down: %s; balancer: %s; hot floor %s\n",
			orNone(m.Up), orNone(m.Down), m.Balancer, bytesText(floorBytes))
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tSHARD\tDATA\tSHARE\tDOCUMENTS\tCHUNKS\t")
		for _, ns := range m.Namespaces {
			for _, row := range ns.Rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%.0f\t%.0f\t%s\n", ns.Namespace, row.Shard, bytesText(row.DataBytes),
					100*row.Fraction, row.Documents, row.Chunks, strings.Join(row.Notes, "; "))
			}
		}
		_ = tw.Flush()
		writeTodo(w, m.Todo, "no hot shard")
	}
	if c := r.Cassandra; c != nil {
		fmt.Fprintf(w, "Cassandra: nodes up: %s; down: %s; hot floor %s\n", orNone(c.Up), orNone(c.Down), bytesText(floorBytes))
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tLOAD\tSHARE\t")
		for _, row := range c.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\n", row.Shard, bytesText(row.DataBytes), 100*row.Fraction, strings.Join(row.Notes, "; "))
		}
		_ = tw.Flush()
		writeTodo(w, c.Todo, "no hot node")
	}
	if len(r.Failed) > 0 {
		return ErrCollectorsFailed
	}
	return nil
}

func writeTodo(w io.Writer, todo []string, none string) {
	if len(todo) == 0 {
		fmt.Fprintln(w, none)
		return
	}
	fmt.Fprintln(w, "what to do:")
	for _, t := range todo {
		fmt.Fprintf(w, "- %s\n", t)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// bytesText is a size in binary units, exact enough to compare with the floor by eye.
func bytesText(b float64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%.0f B", b)
	}
	div, exp := float64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", b/div, "KMGTP"[exp])
}

// Once is --once: one scrape of g, summarised on w.
func Once(w io.Writer, g prometheus.Gatherer, floorBytes float64) error {
	mfs, err := g.Gather()
	if err != nil {
		return fmt.Errorf("monitor: scrape: %w", err)
	}
	return WriteSummary(w, mfs, floorBytes)
}

// upDown splits up-gauge samples into the sorted values of label that are up and down.
func upDown(samples []sample, label string) (up, down []string) {
	for _, x := range samples {
		if x.value == 1 {
			up = append(up, x.labels[label])
		} else {
			down = append(down, x.labels[label])
		}
	}
	slices.Sort(up)
	slices.Sort(down)
	return up, down
}
