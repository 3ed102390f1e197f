package account

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
