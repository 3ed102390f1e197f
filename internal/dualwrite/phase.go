package dualwrite

import (
	"sync"

	"github.com/shardmart/shardmart/internal/migrate"
)

// familyPhase is the phase one family is in, as this process applies it. An operation holds
// it shared while it decides where to write and writes the store serving the family, and a
// phase change waits for the operations begun under the old phase: once this process reports
// a phase, no write decided under the previous one is still running (a write that skipped
// the copy landing after the backfill read its key). Copies ordered by the data itself
// (history entries by their UpdatedAt, events that never change) run after it is released,
// so a hung Cassandra cannot hold up a phase change, nor the reads queued behind one.
type familyPhase struct {
	mu sync.RWMutex
	p  migrate.Phase
}

// begin returns the phase and the func that ends the operation.
func (f *familyPhase) begin() (migrate.Phase, func()) {
	f.mu.RLock()
	return f.p, f.mu.RUnlock
}

func (f *familyPhase) get() migrate.Phase {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p
}

func (f *familyPhase) set(p migrate.Phase) {
	if f.get() == p {
		return
	}
	f.mu.Lock()
	f.p = p
	f.mu.Unlock()
}
