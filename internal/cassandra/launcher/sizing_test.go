package launcher

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A node's sizing is what its cassandra.yaml and JVM arguments say: SmallHost's values when
// none is asked for (the memtable space at most a quarter of the heap), each asked-for value
// otherwise, and the fields left zero from SmallHost.
func TestSizingInConfig(t *testing.T) {
	with := func(f func(*Sizing)) Sizing {
		z := SmallHost
		f(&z)
		return z
	}
	for _, tc := range []struct {
		heapMB      int
		asked, want Sizing
	}{
		{512, Sizing{}, SmallHost},
		{128, Sizing{}, with(func(z *Sizing) { z.MemtableMiB = 32 })},
		{384, CassandraDefaults, CassandraDefaults},
		{512, Sizing{MemtableMiB: 128, MaxGCPauseMillis: 50}, with(func(z *Sizing) { z.MemtableMiB, z.MaxGCPauseMillis = 128, 50 })},
		{512, Sizing{ConcurrentReads: 48}, with(func(z *Sizing) { z.ConcurrentReads = 48 })},
	} {
		c, err := New(Options{Dir: t.TempDir(), HeapMB: tc.heapMB, Sizing: tc.asked})
		if err != nil {
			t.Fatal(err)
		}
		n := c.Nodes()[0]
		y := cassandraYAML(c, n)
		w := tc.want
		for _, line := range []string{
			fmt.Sprintf("memtable_heap_space: %dMiB", w.MemtableMiB), fmt.Sprintf("memtable_offheap_space: %dMiB", w.MemtableMiB),
			fmt.Sprintf("concurrent_reads: %d", w.ConcurrentReads), fmt.Sprintf("concurrent_writes: %d", w.ConcurrentWrites),
			fmt.Sprintf("concurrent_counter_writes: %d", w.ConcurrentWrites), fmt.Sprintf("native_transport_max_threads: %d", w.TransportThreads),
		} {
			if strings.Count(y, "\n"+line+"\n") != 1 {
				t.Errorf("sizing %+v: cassandra.yaml lacks %q:\n%s", tc.asked, line, y)
			}
		}
		if pause := fmt.Sprintf("-XX:MaxGCPauseMillis=%d", w.MaxGCPauseMillis); !slices.Contains(serverArgs(c, n), pause) {
			t.Errorf("sizing %+v: the JVM arguments lack %s", tc.asked, pause)
		}
	}
}
