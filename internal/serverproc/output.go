package serverproc

import (
	"bytes"
	"strings"
	"sync"
)

// Output collects what a server writes (its log, a child's stdout and stderr) from any
// goroutine, for a reader that looks while the server runs: a test waiting for a line, or
// printing the last lines of a process that died.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Tail is the last n lines written so far, without the final newline.
func (o *Output) Tail(n int) string {
	lines := strings.Split(strings.TrimSpace(o.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
