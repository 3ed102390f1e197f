package sqlitestore

import (
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
)

// What a migration (internal/migrate) needs to read products as this store does, from its own
// read-only connection to the file.

// ProductRangeQuery selects the products with ids in [?, ?) (second bound "" for none; give it
// twice: lo, hi, hi), each with its stock, ordered by id.
const ProductRangeQuery = `SELECT ` + productColumns + ` FROM products p WHERE p.id >= ? AND (? = '' OR p.id < ?) ORDER BY p.id`

// ScanProduct decodes a row of ProductRangeQuery.
func ScanProduct(row interface{ Scan(dest ...any) error }) (catalog.Product, error) {
	return scanProduct(row)
}

// HistoryRangeQuery selects the history entries with order ids in [?, ?) (lo, hi, hi as above).
const HistoryRangeQuery = `SELECT ` + historyColumns + ` FROM order_history WHERE order_id >= ? AND (? = '' OR order_id < ?) ORDER BY order_id`

// ScanHistoryEntry decodes a row of HistoryRangeQuery.
func ScanHistoryEntry(row interface{ Scan(dest ...any) error }) (history.Entry, error) {
	return scanEntry(row)
}

// EventRangeQuery selects the events with ids in [?, ?) (lo, hi, hi as above).
const EventRangeQuery = `SELECT ` + eventColumns + ` FROM events WHERE id >= ? AND (? = '' OR id < ?) ORDER BY id`

// ScanEvent decodes a row of EventRangeQuery.
func ScanEvent(row interface{ Scan(dest ...any) error }) (event.Event, error) { return scanEvent(row) }
