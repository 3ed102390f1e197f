package sqlite

import (
	"net/url"

	_ "github.com/mattn/go-sqlite3" // cgo SQLite, chosen by measurement: see docs/benchmarks.md
	_ "modernc.org/sqlite"          // pure-Go SQLite, measured for comparison
)

// WAL lets readers run beside the writer; synchronous=NORMAL in WAL mode loses no committed
// transaction on a process crash (only on power loss can the last commits roll back).
var mattn = driver{name: "sqlite3", dsn: func(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "on")
	q.Set("_txlock", "immediate")
	q.Set("_cache_size", "-32000")
	if readOnly {
		q.Set("_query_only", "true")
	}
	return fileURI(path, q)
}}

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

var defaultDriver = mattn
