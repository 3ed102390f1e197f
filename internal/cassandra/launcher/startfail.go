package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// exitedAt is the error of node i's JVM p exiting, for FailOnExit.
func (c *Cluster) exitedAt(i int, p *serverproc.Child) error {
	_, how := p.Exited()
	return c.exitError(c.nodes[i], how)
}

// exitError says that node n died while starting, how, and why in its own words: the ERROR
// lines its start logged (the cause is often well above the shutdown chatter at the end).
func (c *Cluster) exitError(n Node, how string) error {
	var picked []string
	inError := false
	for _, l := range c.procs.NewLogLines(n.Index, n.SystemLog()) {
		switch {
		case errorLine(l):
			picked, inError = append(picked, l), true
		case logEntry(l):
			inError = false
		case inError && !strings.HasPrefix(strings.TrimSpace(l), "at ") && !strings.HasPrefix(strings.TrimSpace(l), "..."):
			// The exception the ERROR entry carries ("…Exception: Saved cluster name a !=
			// configured name b", "Caused by: …"): the cause itself. Its stack frames are not.
			picked = append(picked, "  "+strings.TrimSpace(l))
		}
	}
	for _, l := range c.procs.NewLogLines(n.Index, filepath.Join(n.LogDir(), "stdout.log")) {
		if errorLine(l) && !slices.Contains(picked, l) { // stdout repeats system.log's lines
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 { // killed, say: what it was doing
		picked = c.procs.NewLogLines(n.Index, n.SystemLog())
	}
	if len(picked) > 12 {
		picked = picked[len(picked)-12:]
	}
	return fmt.Errorf("%w: node %d (%s), while starting (%s):\n  %s", serverproc.ErrExited, n.Index+1, n.Addr, how,
		strings.Join(append(picked, "(log: "+n.SystemLog()+")"), "\n  "))
}

// logEntry tells a line that starts a system.log entry ("INFO  [main] 2026-…").
func logEntry(l string) bool {
	for _, level := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"} {
		if strings.HasPrefix(l, level+" ") {
			return true
		}
	}
	return false
}

// errorLine tells a line that says why Cassandra or its JVM stopped.
func errorLine(l string) bool {
	return strings.Contains(l, "ERROR") || strings.Contains(l, "Exception encountered") || strings.HasPrefix(l, "Error:")
}

// tailErrors returns the last lines of the node's logs, for startup failures.
func tailErrors(n Node) string {
	var b strings.Builder
	for _, f := range []string{n.SystemLog(), filepath.Join(n.LogDir(), "stdout.log")} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		// The cause is an ERROR line, often well above the shutdown chatter at the end.
		var errs []string
		for _, l := range lines {
			if errorLine(l) {
				errs = append(errs, l)
			}
		}
		if len(errs) > 10 {
			errs = errs[len(errs)-10:]
		}
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "== %s (errors)\n%s\n== %s (last lines)\n%s\n", f, strings.Join(errs, "\n"), f, strings.Join(lines, "\n"))
	}
	return b.String()
}
