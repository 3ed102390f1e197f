package account

import "sync/atomic"

// CountComparisons routes bcrypt comparisons through a counter until the returned restore runs.
func CountComparisons(n *int, hashes *[][]byte) (restore func()) {
	orig := compareHash
	compareHash = func(hash, password []byte) error {
		*n++
		*hashes = append(*hashes, hash)
		return orig(hash, password)
	}
	return func() { compareHash = orig }
}

// HashSlots is how many bcrypt operations may run at once.
func HashSlots() int { return cap(hashSlots) }

// GateComparisons holds every comparison until gate closes, counting in running the ones
// inside at once and in peak the most ever, until the returned restore runs.
func GateComparisons(gate <-chan struct{}, running, peak *atomic.Int32) (restore func()) {
	orig := compareHash
	compareHash = func(hash, password []byte) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-gate
		running.Add(-1)
		return orig(hash, password)
	}
	return func() { compareHash = orig }
}
