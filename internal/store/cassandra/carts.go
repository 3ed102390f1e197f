package cassandra

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

// Carts implements cart.Repository on user_carts and guest_carts.
//
// Which operations use a lightweight transaction (Paxos), and why:
//   - PutItem and RemoveItem on an active cart: none. An item is its own clustering row, so
//     the write of one line never touches another line: 20 concurrent edits of different
//     products all survive with plain QUORUM writes.
//   - Creating a cart: `IF active_cart = <seen>` on the owner's static column. Without it two
//     concurrent first PutItems would each create a cart and one cart's items would be lost.
//   - MarkOrdered: `IF active_cart = <cart>`, so it ends exactly the cart that was ordered and
//     never a fresh cart created after it; repeating it finds nothing to do (idempotent).
//   - Merge: a conditional batch on the user's partition `IF active_cart = <user cart> AND
//     merge_seq = <seen>` writes the summed lines and records the guest cart in merged_from,
//     then `IF active_cart = <guest cart>` abandons the guest cart. A login retried after a
//     crash between the two steps sees the guest cart in merged_from and only abandons it,
//     so quantities are never added twice.
//
// A timeout of an LWT leaves its outcome unknown; every LWT here runs in a loop that re-reads
// the partition and decides again, so the statement itself is never blindly retried.
type Carts struct{ s *gocql.Session }

type cartTable struct {
	name, key string
	stmts     cartStmts
}

type cartStmts struct {
	read, readCart, create, putNew, putQty, touch, remove, order, abandon, mergeHeader string
}

func newCartTable(name, key string) cartTable {
	cols := `active_cart, cart_id, product_id, status, order_id, created_at, updated_at, expires_at, merged_from, merge_seq, category, quantity, added_at`
	return cartTable{name: name, key: key, stmts: cartStmts{
		// Newest cart first: the active cart is normally the first prefix of the partition,
		// header row ('') first. Enough rows for a full cart plus a few racing inserts.
		read:     fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ? LIMIT %d`, cols, name, key, cart.MaxItems+11),
		readCart: fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ? AND cart_id = ? LIMIT %d`, cols, name, key, cart.MaxItems+11),
		create: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = ?, status = 'active', created_at = ?, updated_at = ?, expires_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = '' IF active_cart = ?`, name, key),
		putNew: fmt.Sprintf(`UPDATE %s USING TTL ? SET category = ?, quantity = ?, added_at = ? WHERE %s = ? AND cart_id = ? AND product_id = ?`, name, key),
		putQty: fmt.Sprintf(`UPDATE %s USING TTL ? SET quantity = ? WHERE %s = ? AND cart_id = ? AND product_id = ?`, name, key),
		touch:  fmt.Sprintf(`UPDATE %s USING TTL ? SET updated_at = ? WHERE %s = ? AND cart_id = ? AND product_id = ''`, name, key),
		remove: fmt.Sprintf(`DELETE FROM %s WHERE %s = ? AND cart_id = ? AND product_id = ?`, name, key),
		order: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = null, status = 'ordered', order_id = ?, updated_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = '' IF active_cart = ?`, name, key),
		abandon: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = null, status = 'abandoned', updated_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = '' IF active_cart = ?`, name, key),
		mergeHeader: fmt.Sprintf(`UPDATE %s SET merged_from = merged_from + ?, merge_seq = ?, updated_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = '' IF active_cart = ? AND merge_seq = ?`, name, key),
	}}
}

var (
	userCarts  = newCartTable("user_carts", "user_id")
	guestCarts = newCartTable("guest_carts", "session_id")
)

func tableFor(o cart.Owner) (cartTable, string) {
	if o.IsGuest() {
		return guestCarts, o.SessionID
	}
	return userCarts, o.UserID
}

// cartState is what one read of an owner's partition tells.
type cartState struct {
	owner    cart.Owner
	active   gocql.UUID // zero: no active cart
	newest   gocql.UUID // newest cart id in the partition (zero: none)
	header   bool       // the active cart's header row was read
	c        cart.Cart
	merged   map[string]bool
	mergeSeq *int
}

func (st cartState) hasActive() bool { return st.active != (gocql.UUID{}) && st.header }

// live reports whether the active cart is visible at now (a guest cart dies with its session).
func (st cartState) live(now time.Time) bool {
	return st.hasActive() && st.c.Status == cart.Active && (st.c.ExpiresAt.IsZero() || st.c.ExpiresAt.After(now))
}

type cartRow struct {
	active, cartID                     gocql.UUID
	productID, status, orderID         string
	created, updated, expires, addedAt time.Time
	merged                             []string
	mergeSeq                           *int
	category                           string
	quantity                           int64
}

func scanCartRows(iter *gocql.Iter) ([]cartRow, error) {
	var rows []cartRow
	for {
		var r cartRow
		if !iter.Scan(&r.active, &r.cartID, &r.productID, &r.status, &r.orderID, &r.created, &r.updated, &r.expires,
			&r.merged, &r.mergeSeq, &r.category, &r.quantity, &r.addedAt) {
			break
		}
		rows = append(rows, r)
	}
	return rows, iter.Close()
}

func (r *Carts) load(ctx context.Context, owner cart.Owner) (cartState, error) {
	t, key := tableFor(owner)
	st := cartState{owner: owner}
	rows, err := scanCartRows(r.s.Query(t.stmts.read, key).WithContext(ctx).Consistency(CartsConsistency).Idempotent(true).Iter())
	if err != nil {
		return st, fmt.Errorf("read %s cart: %w", owner.Key(), err)
	}
	if len(rows) == 0 {
		return st, nil
	}
	st.active, st.newest = rows[0].active, rows[0].cartID
	if st.active == (gocql.UUID{}) {
		return st, nil
	}
	var mine []cartRow
	for _, row := range rows {
		if row.cartID == st.active {
			mine = append(mine, row)
		}
	}
	// The active cart is not the newest prefix only if clocks went backwards between two
	// carts, or the LIMIT cut it: read it by id.
	if len(mine) == 0 || len(mine) == len(rows) && len(rows) == cart.MaxItems+11 {
		mine, err = scanCartRows(r.s.Query(t.stmts.readCart, key, st.active).WithContext(ctx).Consistency(CartsConsistency).Idempotent(true).Iter())
		if err != nil {
			return st, fmt.Errorf("read %s cart: %w", owner.Key(), err)
		}
	}
	st.c = cart.Cart{ID: st.active.String(), Owner: owner}
	for _, row := range mine {
		if row.productID == "" {
			st.header = true
			st.c.Status, st.c.OrderID = cart.Status(row.status), row.orderID
			st.c.CreatedAt, st.c.UpdatedAt, st.c.ExpiresAt = row.created, row.updated, row.expires
			st.merged = map[string]bool{}
			for _, m := range row.merged {
				st.merged[m] = true
			}
			st.mergeSeq = row.mergeSeq
			continue
		}
		if row.quantity <= 0 { // a line half-written by an expired TTL or a racing delete
			continue
		}
		st.c.Items = append(st.c.Items, cart.Item{ProductID: row.productID, Category: row.category, Quantity: row.quantity, AddedAt: row.addedAt})
	}
	sortItems(st.c.Items)
	return st, nil
}

func sortItems(items []cart.Item) {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].AddedAt.Equal(items[j].AddedAt) {
			return items[i].AddedAt.Before(items[j].AddedAt)
		}
		return items[i].ProductID < items[j].ProductID
	})
}

func (r *Carts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	st, err := r.load(ctx, owner)
	if err != nil {
		return cart.Cart{}, err
	}
	if !st.live(now) {
		return cart.Cart{}, cart.ErrNotFound
	}
	return st.c, nil
}

// maxCASAttempts bounds the re-read loops around lightweight transactions.
const maxCASAttempts = 8

// ensureActive returns the owner's live active cart, creating one (LWT) if there is none.
func (r *Carts) ensureActive(ctx context.Context, owner cart.Owner, expiresAt, now time.Time) (cartState, error) {
	t, key := tableFor(owner)
	if owner.IsGuest() && expiresAt.IsZero() {
		return cartState{}, errors.New("cassandra carts: a guest cart needs its session's expiry")
	}
	if !owner.IsGuest() {
		expiresAt = time.Time{}
	}
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		st, err := r.load(ctx, owner)
		if err != nil || st.live(now) {
			return st, err
		}
		// The new id sorts before (DESC) every older cart of the owner even if this clock lags.
		at := now
		if st.newest != (gocql.UUID{}) && !at.After(st.newest.Time()) {
			at = st.newest.Time().Add(time.Millisecond)
		}
		id := gocql.UUIDFromTime(at)
		var prev any
		if st.active != (gocql.UUID{}) {
			prev = st.active // an expired guest cart or a header lost to TTL: replace it
		}
		n := now.UTC().Truncate(time.Millisecond)
		applied, err := r.s.Query(t.stmts.create, ttlUntil(expiresAt, time.Now()), id, n, n, ts(expiresAt), key, id, prev).
			WithContext(ctx).Consistency(CartsConsistency).SerialConsistency(SerialConsistency).MapScanCAS(map[string]any{})
		if err != nil && !casUnknown(err) {
			return st, fmt.Errorf("create %s cart: %w", owner.Key(), err)
		}
		if applied {
			return cartState{owner: owner, active: id, newest: id, header: true, merged: map[string]bool{},
				c: cart.Cart{ID: id.String(), Owner: owner, Status: cart.Active, CreatedAt: n, UpdatedAt: n, ExpiresAt: expiresAt.UTC().Truncate(time.Millisecond)}}, nil
		}
		// Someone else created (or ended) a cart meanwhile: look again.
	}
	return cartState{}, fmt.Errorf("create %s cart: still contended after %d attempts", owner.Key(), maxCASAttempts)
}

func (r *Carts) PutItem(ctx context.Context, owner cart.Owner, item cart.Item, expiresAt, now time.Time) (cart.Cart, error) {
	if err := cart.ValidateQuantity(item.Quantity); err != nil {
		return cart.Cart{}, err
	}
	st, err := r.ensureActive(ctx, owner, expiresAt, now)
	if err != nil {
		return cart.Cart{}, err
	}
	t, key := tableFor(owner)
	ttl := ttlUntil(st.c.ExpiresAt, time.Now())
	n := now.UTC().Truncate(time.Millisecond)
	item.AddedAt = item.AddedAt.UTC().Truncate(time.Millisecond)
	b := r.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(CartsConsistency)
	idx := -1
	for i, it := range st.c.Items {
		if it.ProductID == item.ProductID {
			idx = i
		}
	}
	if idx >= 0 {
		st.c.Items[idx].Quantity = item.Quantity
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: t.stmts.putQty, Args: []any{ttl, item.Quantity, key, st.active, item.ProductID}, Idempotent: true})
	} else {
		// Soft limit: two lines added concurrently at 99 can both pass (no LWT on the hot path).
		if len(st.c.Items) >= cart.MaxItems {
			return cart.Cart{}, cart.ErrTooManyItems
		}
		if item.AddedAt.IsZero() {
			item.AddedAt = n
		}
		st.c.Items = append(st.c.Items, item)
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: t.stmts.putNew, Args: []any{ttl, item.Category, item.Quantity, ts(item.AddedAt), key, st.active, item.ProductID}, Idempotent: true})
	}
	// One partition: the batch is applied as one mutation, atomically and in isolation.
	b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: t.stmts.touch, Args: []any{ttl, n, key, st.active}, Idempotent: true})
	if err := b.Exec(); err != nil {
		return cart.Cart{}, fmt.Errorf("put item in %s cart: %w", owner.Key(), err)
	}
	st.c.UpdatedAt = n
	sortItems(st.c.Items)
	return st.c, nil
}

func (r *Carts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (cart.Cart, error) {
	st, err := r.load(ctx, owner)
	if err != nil {
		return cart.Cart{}, err
	}
	if !st.live(now) {
		return cart.Cart{}, cart.ErrNotFound
	}
	t, key := tableFor(owner)
	n := now.UTC().Truncate(time.Millisecond)
	b := r.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(CartsConsistency)
	b.Entries = append(b.Entries,
		gocql.BatchEntry{Stmt: t.stmts.remove, Args: []any{key, st.active, productID}, Idempotent: true},
		gocql.BatchEntry{Stmt: t.stmts.touch, Args: []any{ttlUntil(st.c.ExpiresAt, time.Now()), n, key, st.active}, Idempotent: true})
	if err := b.Exec(); err != nil {
		return cart.Cart{}, fmt.Errorf("remove item from %s cart: %w", owner.Key(), err)
	}
	items := st.c.Items[:0]
	for _, it := range st.c.Items {
		if it.ProductID != productID {
			items = append(items, it)
		}
	}
	st.c.Items, st.c.UpdatedAt = items, n
	return st.c, nil
}

func (r *Carts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (cart.Cart, error) {
	guest, user := cart.Guest(sessionID), cart.User(userID)
	g, err := r.load(ctx, guest)
	if err != nil {
		return cart.Cart{}, err
	}
	if !g.live(now) {
		// Nothing to merge (no guest cart, or merged by an earlier login): a no-op.
		return r.ActiveCart(ctx, user, now)
	}
	gid := g.active.String()
	n := now.UTC().Truncate(time.Millisecond)
	merged := false
	for attempt := 0; attempt < maxCASAttempts && !merged; attempt++ {
		u, err := r.ensureActive(ctx, user, time.Time{}, now)
		if err != nil {
			return cart.Cart{}, err
		}
		if u.merged[gid] {
			break // an earlier, interrupted login already moved the lines
		}
		have := map[string]int64{}
		for _, it := range u.c.Items {
			have[it.ProductID] = it.Quantity
		}
		seq := 1
		if u.mergeSeq != nil {
			seq = *u.mergeSeq + 1
		}
		var prevSeq any
		if u.mergeSeq != nil {
			prevSeq = *u.mergeSeq
		}
		b := r.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(CartsConsistency).SerialConsistency(SerialConsistency)
		b.Query(userCarts.stmts.mergeHeader, []string{gid}, seq, n, userID, u.active, u.active, prevSeq)
		lines := len(u.c.Items)
		for _, it := range g.c.Items {
			if q, ok := have[it.ProductID]; ok {
				b.Query(userCarts.stmts.putQty, 0, cart.MergeQuantity(q, it.Quantity), userID, u.active, it.ProductID)
				continue
			}
			if lines >= cart.MaxItems {
				continue // the user's cart is full: the remaining guest lines are dropped
			}
			lines++
			b.Query(userCarts.stmts.putNew, 0, it.Category, it.Quantity, ts(it.AddedAt), userID, u.active, it.ProductID)
		}
		applied, _, err := b.MapExecCAS(map[string]any{})
		if err != nil && !casUnknown(err) {
			return cart.Cart{}, fmt.Errorf("merge guest cart %s into user %s: %w", gid, userID, err)
		}
		merged = applied
	}
	// Abandon the guest cart; if another login abandoned it first, that is the same outcome.
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		applied, err := r.s.Query(guestCarts.stmts.abandon, ttlUntil(g.c.ExpiresAt, time.Now()), n, sessionID, g.active, g.active).
			WithContext(ctx).Consistency(CartsConsistency).SerialConsistency(SerialConsistency).MapScanCAS(map[string]any{})
		if err != nil && !casUnknown(err) {
			return cart.Cart{}, fmt.Errorf("abandon guest cart %s: %w", gid, err)
		}
		if applied {
			break
		}
		again, err := r.load(ctx, guest)
		if err != nil {
			return cart.Cart{}, err
		}
		if again.active != g.active {
			break
		}
	}
	return r.ActiveCart(ctx, user, now)
}

func (r *Carts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	id, err := gocql.ParseUUID(cartID)
	if err != nil {
		return nil // not a cart id this backend issued: no cart of this owner has it
	}
	t, key := tableFor(owner)
	n := now.UTC().Truncate(time.Millisecond)
	for attempt := 0; attempt < maxCASAttempts; attempt++ {
		st, err := r.load(ctx, owner)
		if err != nil {
			return err
		}
		if st.active != id {
			return nil // ordered already (a replay), or not this owner's active cart
		}
		applied, err := r.s.Query(t.stmts.order, ttlUntil(st.c.ExpiresAt, time.Now()), orderID, n, key, id, id).
			WithContext(ctx).Consistency(CartsConsistency).SerialConsistency(SerialConsistency).MapScanCAS(map[string]any{})
		if err != nil && !casUnknown(err) {
			return fmt.Errorf("mark %s cart %s ordered: %w", owner.Key(), cartID, err)
		}
		if applied {
			return nil
		}
	}
	return fmt.Errorf("mark %s cart %s ordered: still contended after %d attempts", owner.Key(), cartID, maxCASAttempts)
}

// PurgeExpired has nothing to do: every guest-cart cell carries a TTL ending at the session's
// expiry, so Cassandra drops expired carts itself (compaction then removes them from disk).
func (r *Carts) PurgeExpired(ctx context.Context, now time.Time) (int, error) { return 0, nil }
