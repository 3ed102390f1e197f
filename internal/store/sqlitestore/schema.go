package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// upgrades are applied in order; PRAGMA user_version records how many ran.
var upgrades = []string{`
CREATE TABLE products (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	category   TEXT NOT NULL,
	price      INTEGER NOT NULL,          -- cents
	attributes TEXT NOT NULL DEFAULT '{}', -- JSON object
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
-- PRD-2: one category, a price range, sorted by price then id (the keyset cursor).
CREATE INDEX products_category_price ON products (category, price, id);

CREATE TABLE stock (
	product_id TEXT NOT NULL REFERENCES products (id) ON DELETE CASCADE,
	zone       TEXT NOT NULL,
	qty        INTEGER NOT NULL CHECK (qty >= 0),
	PRIMARY KEY (product_id, zone)
) WITHOUT ROWID;

CREATE TABLE orders (
	id         TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL,
	cart_id    TEXT NOT NULL UNIQUE,  -- one order per cart, even before the cart is marked
	zone       TEXT NOT NULL,
	idem_key   TEXT NOT NULL,
	status     TEXT NOT NULL,
	total      INTEGER NOT NULL,
	items      TEXT NOT NULL,         -- JSON array of order.Item
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (user_id, idem_key)
);

CREATE TABLE outbox (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so checkpoints stay valid
	topic      TEXT NOT NULL,
	key        TEXT NOT NULL,
	payload    BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE outbox_checkpoints (
	consumer TEXT PRIMARY KEY,
	seq      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE users (
	id            TEXT PRIMARY KEY,
	email         TEXT NOT NULL UNIQUE,
	password_hash TEXT NOT NULL,
	created_at    INTEGER NOT NULL
);

CREATE TABLE carts (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,             -- cart.Owner.Key(): u:<user> or s:<session>
	status     TEXT NOT NULL,
	order_id   TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL DEFAULT 0 -- 0: never (user carts)
);
CREATE UNIQUE INDEX carts_one_active ON carts (owner) WHERE status = 'active';
CREATE INDEX carts_expiry ON carts (expires_at) WHERE expires_at > 0;

-- One row per item: concurrent edits of different items never collide.
CREATE TABLE cart_items (
	cart_id    TEXT NOT NULL REFERENCES carts (id) ON DELETE CASCADE,
	product_id TEXT NOT NULL,
	category   TEXT NOT NULL,
	qty        INTEGER NOT NULL,
	added_at   INTEGER NOT NULL,
	PRIMARY KEY (cart_id, product_id)
) WITHOUT ROWID;

CREATE TABLE sessions (
	id          TEXT PRIMARY KEY,          -- SHA-256 of the bearer token
	user_id     TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	last_active INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	ip          TEXT NOT NULL,
	user_agent  TEXT NOT NULL,
	status      TEXT NOT NULL,
	data        TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
CREATE INDEX sessions_expiry ON sessions (expires_at);

-- EVT-1: the (actor, day) prefix is the Cassandra partition; newest first within it.
CREATE TABLE events (
	actor      TEXT NOT NULL,
	day        INTEGER NOT NULL,
	at         INTEGER NOT NULL,
	id         TEXT NOT NULL,
	type       TEXT NOT NULL,
	product_id TEXT NOT NULL DEFAULT '',
	details    TEXT NOT NULL DEFAULT '{}',
	PRIMARY KEY (actor, day, at, id)
) WITHOUT ROWID;

-- ORD-2 read model fed by the projector; order_id in the key keeps same-instant orders apart.
CREATE TABLE order_history (
	user_id    TEXT NOT NULL,
	placed_at  INTEGER NOT NULL,
	order_id   TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	status     TEXT NOT NULL,
	zone       TEXT NOT NULL,
	total      INTEGER NOT NULL,
	items      TEXT NOT NULL,
	PRIMARY KEY (user_id, placed_at, order_id)
) WITHOUT ROWID;
`, `
-- A checkout freezes the cart it orders from (the order id is the freeze's token) until its
-- lease ends; cart_fences records carts whose stale checkout may never place an order.
ALTER TABLE carts ADD COLUMN checkout_order TEXT NOT NULL DEFAULT '';
ALTER TABLE carts ADD COLUMN checkout_until INTEGER NOT NULL DEFAULT 0;
-- Event retention deletes by time.
CREATE INDEX events_at ON events (at);
CREATE TABLE cart_fences (
	cart_id TEXT PRIMARY KEY,
	at      INTEGER NOT NULL
) WITHOUT ROWID;
`, `
-- A description and an active flag; existing products stay active.
ALTER TABLE products ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE products ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
-- A category newest first (by created_at DESC), keyset on id.
CREATE INDEX products_category_newest ON products (category, created_at DESC, id DESC);
`, `
-- MIG-1: a migration to Cassandra reads history and events by key range (internal/migrate).
CREATE INDEX order_history_order ON order_history (order_id);
CREATE INDEX events_id ON events (id);
`}

func upgradeSchema(ctx context.Context, w *sql.DB) error {
	var version int
	if err := w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("sqlite: read schema version: %w", err)
	}
	if version > len(upgrades) {
		return fmt.Errorf("sqlite: database schema version %d is newer than this binary (%d)", version, len(upgrades))
	}
	for i := version; i < len(upgrades); i++ {
		tx, err := w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: schema upgrade: %w", err)
		}
		if _, err := tx.ExecContext(ctx, upgrades[i]); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("sqlite: schema upgrade %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("sqlite: schema upgrade %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: schema upgrade %d: %w", i+1, err)
		}
	}
	return nil
}
