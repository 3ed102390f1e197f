package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// tail returns the last lines of member m's log, for startup failures.
func (s *Set) tail(m Member) string {
	var b strings.Builder
	for _, f := range []string{m.stdoutPath(), m.LogPath()} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 12 {
			lines = lines[len(lines)-12:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// LogTail is the end of member i's log, for a failed test.
func (s *Set) LogTail(i int) string { return s.tail(s.members[i]) }

func (m Member) stdoutPath() string { return filepath.Join(m.Dir, "stdout.log") }

// exitedAt is the error of member i's mongod p exiting, for FailOnExit.
func (s *Set) exitedAt(i int, p *serverproc.Child) error {
	_, how := p.Exited()
	return s.exitError(s.members[i], how)
}

// exitError says that member m died while starting, how, and why in its own words.
func (s *Set) exitError(m Member, how string) error {
	return fmt.Errorf("%w: set %s member %d (%s), while starting (%s):\n  %s",
		serverproc.ErrExited, s.opts.Name, m.Index, m.Host, how, s.fatalLines(m))
}

// fatalLines picks why member m's last start failed from what that start wrote: mongod's
// fatal and error entries ("s":"F" and "E" in its JSON log), else the end of its output.
func (s *Set) fatalLines(m Member) string {
	var picked []string
	for _, l := range s.procs.NewLogLines(m.Index, m.LogPath()) {
		var e struct {
			S    string          `json:"s"`
			Msg  string          `json:"msg"`
			Attr json.RawMessage `json:"attr"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.S != "F" && e.S != "E" {
			continue
		}
		line := e.S + " " + strings.TrimSpace(e.Msg)
		if len(e.Attr) > 0 {
			line += " " + string(e.Attr)
		}
		picked = append(picked, clip(line, 500))
	}
	if len(picked) == 0 { // killed, say: what it was doing
		picked = lastLines(s.procs.NewLogLines(m.Index, m.LogPath()), 5)
	}
	if len(picked) == 0 { // refused before its log was open (a bad option): it said so on stdout
		picked = s.procs.NewLogLines(m.Index, m.stdoutPath())
	}
	picked = lastLines(picked, 8)
	return strings.Join(append(picked, "(log: "+m.LogPath()+")"), "\n  ")
}

func lastLines(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
