package cassandrastore

import (
	"testing"
	"time"
)

// The driver's write coalescing is off unless a wait is asked for.
func TestWriteCoalescing(t *testing.T) {
	for _, tc := range []struct{ asked, want time.Duration }{{0, 0}, {-1, 0}, {50 * time.Microsecond, 50 * time.Microsecond}} {
		c, err := ClusterConfig(Config{Hosts: []string{"127.0.0.1"}, WriteCoalesce: tc.asked})
		if err != nil {
			t.Fatal(err)
		}
		if c.WriteCoalesceWaitTime != tc.want {
			t.Errorf("WriteCoalesce %s: the driver waits %s, want %s", tc.asked, c.WriteCoalesceWaitTime, tc.want)
		}
	}
}
