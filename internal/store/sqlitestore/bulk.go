package sqlitestore

import (
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
)

// What a migration (internal/migrate) needs to read products as this store does, from its own
// read-only connection to the file.

// ProductSelect selects products (table alias p), each with its stock; the caller adds its
// WHERE on p.id.
const ProductSelect = `SELECT ` + productColumns + ` FROM products p`

// ScanProduct decodes a row of ProductSelect.
func ScanProduct(row interface{ Scan(dest ...any) error }) (catalog.Product, error) {
	return scanProduct(row)
}

// HistorySelect selects history entries; the caller adds its WHERE.
const HistorySelect = `SELECT ` + historyColumns + ` FROM order_history`

// ScanHistoryEntry decodes a row of HistorySelect.
func ScanHistoryEntry(row interface{ Scan(dest ...any) error }) (history.Entry, error) {
	return scanEntry(row)
}

// EventSelect selects events; the caller adds its WHERE.
const EventSelect = `SELECT ` + eventColumns + ` FROM events`

// ScanEvent decodes a row of EventSelect.
func ScanEvent(row interface{ Scan(dest ...any) error }) (event.Event, error) { return scanEvent(row) }
