package serverproc

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Writers on many goroutines and a reader at the same time (run with -race): no write is lost
// or torn, and Tail keeps the last lines.
func TestOutputTakesConcurrentWrites(t *testing.T) {
	var o Output
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&o, "w%d line %d\n", w, i)
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = o.Tail(3)
		}
	})
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(o.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		var w, i int
		if _, err := fmt.Sscanf(l, "w%d line %d", &w, &i); err != nil {
			t.Fatalf("torn line %q: %v", l, err)
		}
	}
	if got, want := o.Tail(2), strings.Join(lines[398:], "\n"); got != want {
		t.Errorf("Tail(2) = %q, want %q", got, want)
	}
	if got := o.Tail(1000); got != strings.Join(lines, "\n") {
		t.Errorf("Tail(1000) is not the whole output")
	}
	var empty Output
	if got := empty.Tail(3); got != "" {
		t.Errorf("Tail of nothing = %q, want empty", got)
	}
}
