package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

type orders DB

const orderColumns = `id, user_id, cart_id, zone, idem_key, status, total, items, created_at, updated_at`

type queryRower interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

func scanOrder(row rowScanner) (order.Order, error) {
	var o order.Order
	var items string
	var created, updated int64
	err := row.Scan(&o.ID, &o.UserID, &o.CartID, &o.Zone, &o.IdempotencyKey, &o.Status, &o.Total, &items, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return o, order.ErrNotFound
	}
	if err != nil {
		return o, err
	}
	o.CreatedAt, o.UpdatedAt = fromNanos(created), fromNanos(updated)
	if err := json.Unmarshal([]byte(items), &o.Items); err != nil {
		return o, fmt.Errorf("order %s items: %w", o.ID, err)
	}
	return o, nil
}

func byKey(ctx context.Context, q queryRower, userID, key string) (order.Order, error) {
	return scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE user_id = ? AND idem_key = ?`, userID, key))
}

// Place is ORD-1 in one write transaction; see order.Repository for the rules.
func (r *orders) Place(ctx context.Context, p order.Placement) (o order.Order, created bool, err error) {
	if err := order.ValidatePlacement(p); err != nil {
		return order.Order{}, false, err
	}
	err = (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		existing, err := byKey(ctx, tx, p.UserID, p.IdempotencyKey)
		if err == nil {
			o = existing
			return nil
		}
		if !errors.Is(err, order.ErrNotFound) {
			return err
		}
		var taken int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM orders WHERE cart_id = ?) + (SELECT count(*) FROM cart_fences WHERE cart_id = ?)`,
			p.CartID, p.CartID).Scan(&taken); err != nil {
			return err
		}
		if taken > 0 {
			return order.ErrCartAlreadyOrdered
		}
		priced := make([]order.Priced, 0, len(p.Lines))
		for _, l := range p.Lines {
			pl := order.Priced{Line: l}
			// PRD-4: the price is read inside the transaction that takes the stock.
			err := tx.QueryRowContext(ctx, `SELECT name, category, price FROM products WHERE id = ?`, l.ProductID).
				Scan(&pl.Name, &pl.Category, &pl.UnitPrice)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("product %s: %w", l.ProductID, catalog.ErrNotFound)
			}
			if err != nil {
				return err
			}
			if _, err := changeStock(ctx, tx, l.ProductID, p.Zone, -l.Quantity); err != nil {
				return err
			}
			priced = append(priced, pl)
		}
		if o, err = order.New(p, priced); err != nil {
			return err
		}
		if err := insertOrder(ctx, tx, o); err != nil {
			return err
		}
		created = true
		return appendOrderEvent(ctx, tx, outbox.TopicOrderPlaced, o)
	})
	if err != nil {
		return order.Order{}, false, err
	}
	return o, created, nil
}

func insertOrder(ctx context.Context, tx *sql.Tx, o order.Order) error {
	items, err := json.Marshal(o.Items)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO orders (`+orderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		o.ID, o.UserID, o.CartID, o.Zone, o.IdempotencyKey, string(o.Status), int64(o.Total), string(items), nanos(o.CreatedAt), nanos(o.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert order: %w", err)
	}
	return nil
}

func appendOrderEvent(ctx context.Context, tx *sql.Tx, topic string, o order.Order) error {
	payload, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return appendOutbox(ctx, tx, topic, o.ID, payload, o.UpdatedAt)
}

func (r *orders) GetOrder(ctx context.Context, id string) (o order.Order, err error) {
	return scanOrder(r.r.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ?`, id))
}

func (r *orders) ByIdempotencyKey(ctx context.Context, userID, key string) (o order.Order, err error) {
	return byKey(ctx, r.r, userID, key)
}

func (r *orders) FenceCart(ctx context.Context, cartID string) (orderID string, err error) {
	err = (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT id FROM orders WHERE cart_id = ?`, cartID).Scan(&orderID)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO cart_fences (cart_id, at) VALUES (?, ?) ON CONFLICT DO NOTHING`, cartID, time.Now().UnixNano())
		return err
	})
	return orderID, err
}

func (r *orders) Transition(ctx context.Context, id string, to order.Status, at time.Time) (o order.Order, err error) {
	err = (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ?`, id))
		if err != nil {
			return err
		}
		if err := o.TransitionTo(to, at); err != nil {
			return err
		}
		if order.Restocks(to) {
			for _, it := range o.Items {
				if _, err := changeStock(ctx, tx, it.ProductID, o.Zone, it.Quantity); err != nil {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET status = ?, updated_at = ? WHERE id = ?`, string(o.Status), nanos(o.UpdatedAt), id); err != nil {
			return fmt.Errorf("update order status: %w", err)
		}
		return appendOrderEvent(ctx, tx, outbox.TopicOrderStatus, o)
	})
	return o, err
}
