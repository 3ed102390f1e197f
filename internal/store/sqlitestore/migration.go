package sqlitestore

import "github.com/shardmart/shardmart/internal/catalog"

// What a migration (internal/migrate) needs to read products as this store does, from its own
// read-only connection to the file.

// ProductRangeQuery selects the products with ids in [?, ?) (second bound "" for none; give it
// twice: lo, hi, hi), each with its stock, ordered by id.
const ProductRangeQuery = `SELECT ` + productColumns + ` FROM products p WHERE p.id >= ? AND (? = '' OR p.id < ?) ORDER BY p.id`

// ScanProduct decodes a row of ProductRangeQuery.
func ScanProduct(row interface{ Scan(dest ...any) error }) (catalog.Product, error) { return scanProduct(row) }
