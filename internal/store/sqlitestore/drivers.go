package sqlitestore

import (
	"net/url"

	_ "github.com/mattn/go-sqlite3" // cgo SQLite, chosen over modernc.org/sqlite by measurement: docs/evidence/benchmarks.md
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
	// Reuse prepared statements per connection: preparing was a fifth of an order's CPU.
	q.Set("_stmt_cache_size", "64")
	if readOnly {
		q.Set("_query_only", "true")
	}
	return fileURI(path, q)
}}

var defaultDriver = mattn
