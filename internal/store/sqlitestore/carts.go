package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
)

type carts DB

type cartRow struct {
	id            string
	status        string
	orderID       string
	created       int64
	updated       int64
	expiresAt     int64
	checkoutOrder string
	checkoutUntil int64
}

// editable applies cart.Editable to the row a change is about to modify.
func (c cartRow) editable(now time.Time) error {
	return cart.Cart{ID: c.id, CheckoutOrder: c.checkoutOrder, CheckoutUntil: fromNanos(c.checkoutUntil)}.Editable(now)
}

const cartColumns = `id, status, order_id, created_at, updated_at, expires_at, checkout_order, checkout_until`

// dest is where a row of cartColumns scans to.
func (c *cartRow) dest() []any {
	return []any{&c.id, &c.status, &c.orderID, &c.created, &c.updated, &c.expiresAt, &c.checkoutOrder, &c.checkoutUntil}
}

// cart is the cart the header row holds, without its lines.
func (c cartRow) cart(owner cart.Owner) cart.Cart {
	return cart.Cart{ID: c.id, Owner: owner, Status: cart.Status(c.status), OrderID: c.orderID,
		CreatedAt: fromNanos(c.created), UpdatedAt: fromNanos(c.updated), ExpiresAt: fromNanos(c.expiresAt),
		CheckoutOrder: c.checkoutOrder, CheckoutUntil: fromNanos(c.checkoutUntil)}
}

const cartItemColumns = `product_id, category, qty, added_at`

// scanCartItem decodes a row of cartItemColumns, after any columns in before.
func scanCartItem(row rowScanner, before ...any) (cart.Item, error) {
	var it cart.Item
	var added int64
	if err := row.Scan(append(before, &it.ProductID, &it.Category, &it.Quantity, &added)...); err != nil {
		return it, err
	}
	it.AddedAt = fromNanos(added)
	return it, nil
}

// activeCart finds the owner's live active cart; q is the reader pool or the current tx.
func activeCart(ctx context.Context, q queryRower, owner cart.Owner, now time.Time) (cartRow, error) {
	var c cartRow
	err := q.QueryRowContext(ctx, `SELECT `+cartColumns+` FROM carts
		WHERE owner = ? AND status = 'active' AND (expires_at = 0 OR expires_at > ?)`, owner.Key(), nanos(now)).Scan(c.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return c, cart.ErrNotFound
	}
	return c, err
}

// editableCart is activeCart for a change: the cart must not be frozen by a checkout.
func editableCart(ctx context.Context, tx *sql.Tx, owner cart.Owner, now time.Time) (cartRow, error) {
	row, err := activeCart(ctx, tx, owner, now)
	if err != nil {
		return row, err
	}
	return row, row.editable(now)
}

type queryer interface {
	queryRower
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

func loadCart(ctx context.Context, q queryer, owner cart.Owner, row cartRow) (cart.Cart, error) {
	c := row.cart(owner)
	rows, err := q.QueryContext(ctx, `SELECT `+cartItemColumns+` FROM cart_items WHERE cart_id = ? ORDER BY added_at, product_id`, row.id)
	if err != nil {
		return c, fmt.Errorf("read cart items: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		it, err := scanCartItem(rows)
		if err != nil {
			return c, err
		}
		c.Items = append(c.Items, it)
	}
	return c, rows.Err()
}

func (r *carts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (c cart.Cart, err error) {
	row, err := activeCart(ctx, r.r, owner, now)
	if err != nil {
		return c, err
	}
	return loadCart(ctx, r.r, owner, row)
}

// ensureActive returns the owner's editable active cart in tx, creating it if there is none.
// A guest whose cart was merged at login gets ErrGuestMerged instead of a cart nobody would
// see again (a merged cart is abandoned before its expiry; an expired one after it).
func ensureActive(ctx context.Context, tx *sql.Tx, owner cart.Owner, expiresAt, now time.Time) (cartRow, error) {
	row, err := editableCart(ctx, tx, owner, now)
	if !errors.Is(err, cart.ErrNotFound) {
		return row, err
	}
	if owner.IsGuest() {
		var merged int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM carts WHERE owner = ? AND status = 'abandoned' AND expires_at > ?`,
			owner.Key(), nanos(now)).Scan(&merged); err != nil {
			return row, err
		}
		if merged > 0 {
			return row, cart.ErrGuestMerged
		}
	}
	// A stale active cart past its expiry would block the unique index; retire it first.
	if _, err := tx.ExecContext(ctx, `UPDATE carts SET status = 'abandoned' WHERE owner = ? AND status = 'active'`, owner.Key()); err != nil {
		return row, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return row, err
	}
	row = cartRow{id: id.String(), status: string(cart.Active), created: nanos(now), updated: nanos(now), expiresAt: nanos(expiresAt)}
	_, err = tx.ExecContext(ctx, `INSERT INTO carts (id, owner, status, created_at, updated_at, expires_at) VALUES (?, ?, 'active', ?, ?, ?)`,
		row.id, owner.Key(), row.created, row.updated, row.expiresAt)
	if err != nil {
		return row, fmt.Errorf("create cart: %w", err)
	}
	return row, nil
}

// putItem upserts one line in tx, enforcing MaxItems.
func putItem(ctx context.Context, tx *sql.Tx, cartID string, it cart.Item) error {
	res, err := tx.ExecContext(ctx, `UPDATE cart_items SET qty = ? WHERE cart_id = ? AND product_id = ?`, it.Quantity, cartID, it.ProductID)
	if err != nil {
		return fmt.Errorf("update cart item: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	var count int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM cart_items WHERE cart_id = ?`, cartID).Scan(&count); err != nil {
		return err
	}
	if count >= cart.MaxItems {
		return cart.ErrTooManyItems
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO cart_items (cart_id, product_id, category, qty, added_at) VALUES (?, ?, ?, ?, ?)`,
		cartID, it.ProductID, it.Category, it.Quantity, nanos(it.AddedAt))
	if err != nil {
		return fmt.Errorf("insert cart item: %w", err)
	}
	return nil
}

func touchCart(ctx context.Context, tx *sql.Tx, row *cartRow, now time.Time) error {
	row.updated = nanos(now)
	_, err := tx.ExecContext(ctx, `UPDATE carts SET updated_at = ? WHERE id = ?`, row.updated, row.id)
	return err
}

func (r *carts) PutItem(ctx context.Context, owner cart.Owner, it cart.Item, expiresAt, now time.Time) (c cart.Cart, err error) {
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		row, err := ensureActive(ctx, tx, owner, expiresAt, now)
		if err != nil {
			return err
		}
		if err := putItem(ctx, tx, row.id, it); err != nil {
			return err
		}
		if err := touchCart(ctx, tx, &row, now); err != nil {
			return err
		}
		c, err = loadCart(ctx, tx, owner, row)
		return err
	})
	return c, err
}

func (r *carts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (c cart.Cart, err error) {
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		row, err := editableCart(ctx, tx, owner, now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM cart_items WHERE cart_id = ? AND product_id = ?`, row.id, productID); err != nil {
			return fmt.Errorf("delete cart item: %w", err)
		}
		if err := touchCart(ctx, tx, &row, now); err != nil {
			return err
		}
		c, err = loadCart(ctx, tx, owner, row)
		return err
	})
	return c, err
}

func (r *carts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (res cart.MergeResult, err error) {
	guest, user := cart.Guest(sessionID), cart.User(userID)
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		res = cart.MergeResult{}
		g, err := activeCart(ctx, tx, guest, now)
		if errors.Is(err, cart.ErrNotFound) {
			// Nothing to merge (no guest cart, or merged by an earlier login): a no-op.
			u, err := activeCart(ctx, tx, user, now)
			if err != nil {
				return err
			}
			res.Cart, err = loadCart(ctx, tx, user, u)
			return err
		}
		if err != nil {
			return err
		}
		gc, err := loadCart(ctx, tx, guest, g)
		if err != nil {
			return err
		}
		u, err := ensureActive(ctx, tx, user, time.Time{}, now)
		if err != nil {
			return err
		}
		uc, err := loadCart(ctx, tx, user, u)
		if err != nil {
			return err
		}
		merged, notMerged := cart.MergeLines(uc.Items, gc.Items)
		for _, it := range merged {
			if err := putItem(ctx, tx, u.id, it); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE carts SET status = 'abandoned', updated_at = ? WHERE id = ?`, nanos(now), g.id); err != nil {
			return fmt.Errorf("abandon guest cart: %w", err)
		}
		if err := touchCart(ctx, tx, &u, now); err != nil {
			return err
		}
		res.NotMerged = notMerged
		res.Cart, err = loadCart(ctx, tx, user, u)
		return err
	})
	return res, err
}

func (r *carts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (c cart.Cart, err error) {
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		row, err := editableCart(ctx, tx, owner, now)
		if err != nil {
			return err
		}
		row.checkoutOrder, row.checkoutUntil = orderID, nanos(until)
		if _, err := tx.ExecContext(ctx, `UPDATE carts SET checkout_order = ?, checkout_until = ? WHERE id = ?`,
			row.checkoutOrder, row.checkoutUntil, row.id); err != nil {
			return fmt.Errorf("freeze cart: %w", err)
		}
		c, err = loadCart(ctx, tx, owner, row)
		return err
	})
	return c, err
}

func (r *carts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) (err error) {
	_, err = r.w.ExecContext(ctx, `UPDATE carts SET checkout_order = '', checkout_until = 0
		WHERE id = ? AND owner = ? AND status = 'active' AND checkout_order = ?`, cartID, owner.Key(), orderID)
	return err
}

func (r *carts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (c cart.Cart, err error) {
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		old, err := activeCart(ctx, tx, owner, now)
		if err != nil {
			return err
		}
		if old.id != cartID {
			c, err = loadCart(ctx, tx, owner, old)
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE carts SET status = 'abandoned', updated_at = ? WHERE id = ?`, nanos(now), old.id); err != nil {
			return fmt.Errorf("end fenced cart: %w", err)
		}
		row, err := ensureActive(ctx, tx, owner, fromNanos(old.expiresAt), now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO cart_items (cart_id, product_id, category, qty, added_at)
			SELECT ?, product_id, category, qty, added_at FROM cart_items WHERE cart_id = ?`, row.id, old.id); err != nil {
			return fmt.Errorf("copy cart lines: %w", err)
		}
		c, err = loadCart(ctx, tx, owner, row)
		return err
	})
	return c, err
}

func (r *carts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) (err error) {
	_, err = r.w.ExecContext(ctx, `UPDATE carts SET status = 'ordered', order_id = ?, updated_at = ?
		WHERE id = ? AND owner = ? AND status != 'ordered'`, orderID, nanos(now), cartID, owner.Key())
	return err
}

func (r *carts) PurgeExpired(ctx context.Context, now time.Time) (n int, err error) {
	res, err := r.w.ExecContext(ctx, `DELETE FROM carts WHERE expires_at > 0 AND expires_at <= ?`, nanos(now))
	if err != nil {
		return 0, err
	}
	affected, err := res.RowsAffected()
	return int(affected), err
}

// RestoreCarts makes owner's carts hold exactly cs, active being the one active cart ("" for
// none): a migration's rollback path copies Cassandra's carts back here while Cassandra
// serves them (docs/migration.md), so a rollback finds every change made since the cutover.
// An active cart here that cs does not name as active is abandoned first (one active cart per
// owner); lines are replaced whole.
func (r *carts) RestoreCarts(ctx context.Context, owner cart.Owner, cs []cart.Cart, active string) error {
	return (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE carts SET status = 'abandoned' WHERE owner = ? AND status = 'active' AND id != ?`, owner.Key(), active); err != nil {
			return fmt.Errorf("restore carts: %w", err)
		}
		for _, c := range cs {
			status := c.Status
			if status == cart.Active && c.ID != active {
				status = cart.Abandoned // Cassandra's active_cart says another cart is the live one
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO carts (id, owner, status, order_id, created_at, updated_at, expires_at, checkout_order, checkout_until)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (id) DO UPDATE SET status = excluded.status, order_id = excluded.order_id, updated_at = excluded.updated_at,
					expires_at = excluded.expires_at, checkout_order = excluded.checkout_order, checkout_until = excluded.checkout_until`,
				c.ID, owner.Key(), string(status), c.OrderID, nanos(c.CreatedAt), nanos(c.UpdatedAt), nanos(c.ExpiresAt), c.CheckoutOrder, nanos(c.CheckoutUntil))
			if err != nil {
				return fmt.Errorf("restore cart %s: %w", c.ID, err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM cart_items WHERE cart_id = ?`, c.ID); err != nil {
				return fmt.Errorf("restore cart %s: %w", c.ID, err)
			}
			for _, it := range c.Items {
				if _, err := tx.ExecContext(ctx, `INSERT INTO cart_items (cart_id, product_id, category, qty, added_at) VALUES (?, ?, ?, ?, ?)`,
					c.ID, it.ProductID, it.Category, it.Quantity, nanos(it.AddedAt)); err != nil {
					return fmt.Errorf("restore cart %s: %w", c.ID, err)
				}
			}
		}
		return nil
	})
}
