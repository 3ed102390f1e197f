package sqlitestore

import (
	"net/url"

	_ "modernc.org/sqlite" // the pure-Go driver we measured against; tests keep it honest
)

// modernc is the runner-up driver. The contract suite and the benchmarks run on it too, so
// switching (for CGO-free builds) stays one line in drivers.go.
var modernc = driver{name: "sqlite", dsn: func(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", "cache_size(-32000)")
	if readOnly {
		q.Add("_pragma", "query_only(true)")
	}
	q.Set("_txlock", "immediate")
	return fileURI(path, q)
}}
