package cassandrastore

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

// carts implements cart.Repository on user_carts and guest_carts.
//
// Lines (an item is its own clustering row) are only ever written by plain QUORUM writes at a
// client timestamp (nextLineTS); a removal is a line of quantity 0. Header cells and the
// static active_cart are only ever written by lightweight transactions. No cell is written
// both ways. A cart the API names by one (logical) id is stored as one physical cart per
// generation: a rewrite of its lines (EndCheckout's give-back, the user side of a merge)
// writes them into a fresh physical cart no request knows, then one LWT switches active_cart
// to it (switchTo), so lines written into the old generation are dead.
//
//   - PutItem and RemoveItem (edit): write the line into the remembered generation, then read
//     that generation at QUORUM (the fence, and the answer). Not frozen and still active:
//     acknowledged (quorum intersection puts it in every later freeze's read). Frozen: the
//     freeze's published snapshot decides, its line for the product written at or after the
//     edit's timestamp: acknowledged, else refused while the freeze holds the cart, redone in
//     the new generation once it moved on. A put into an owner with no cart writes its line
//     into a new physical cart before the LWT creating it (createWith): no freeze can know a
//     cart before it exists.
//   - Creating a cart: `IF active_cart = <seen>` on the owner's static column. Without it two
//     concurrent first PutItems would each create a cart and one cart's items would be lost.
//   - BeginCheckout: `IF active_cart = <cart> AND status = 'active' AND checkout_order = null`
//     sets checkout_order/checkout_until; then a QUORUM read of the lines (with writetimes) is
//     published as the header's snapshot `IF ... AND snapshot_at = null` (publish): exactly one
//     snapshot per freeze, the order's lines. A reader that finds no snapshot publishes one
//     itself after snapshotWait; the first wins for everyone.
//   - EndCheckout: the snapshot into a new generation, switched to `IF checkout_order = <its
//     order>` (same logical id). Reopen: the same into a new cart (new logical id).
//   - MarkOrdered: `IF active_cart = <cart>`, frozen or not, so it ends exactly the cart that
//     was ordered and never a fresh cart created after it; a replay finds nothing to do.
//   - Merge: the guest cart is frozen (`status = 'merging'`) and its snapshot published; guest
//     edits in flight answer by it (ErrGuestMerged when not in it). The user's cart is created
//     with the merged lines, or frozen by a merge token, its snapshot published, and
//     cart.MergeLines of both snapshots switched in as a new generation with merged_from + the
//     guest cart; then the guest cart is abandoned. A login retried after a crash resumes:
//     merged_from tells whether the lines already moved, so quantities are never added twice.
//
// A timeout of an LWT leaves its outcome unknown; every LWT here runs in casLoop, which re-reads
// the partition (at SERIAL) and decides again, so the statement itself is never blindly retried.
// A failed line write or fence read is an unknown outcome too, never a refusal.
//
// Why this keeps every guarantee the Paxos edit had, and which LWTs stay: docs/cassandra.md,
// "Carts".
type carts Store

// merging is the status of a guest cart whose lines a login is moving into merge_into's cart.
const merging cart.Status = "merging"

type cartTable struct {
	name, key string
	stmts     cartStmts
}

type cartStmts struct {
	read, readCart, create, line, removal, order, abandon, freeze, publish, retire,
	mergeFreeze string
}

// editIf is what freezing a cart requires: the cart is the owner's active one, not being
// merged away, and not frozen by a checkout.
const editIf = `IF active_cart = ? AND status = 'active' AND checkout_order = null`

// heldIf names one freeze of a cart (header row): a checkout's (status 'active',
// checkout_order its order or a merge's token) or a login's of a guest cart (status
// 'merging', merge_into the user). Publishing its snapshot and ending it are conditioned on it.
const heldIf = `IF status = ? AND checkout_order = ? AND merge_into = ?`

// cartCols are the columns a cartRow scans (cartRow.dest).
const cartCols = `active_cart, cart_id, product_id, status, order_id, created_at, updated_at, expires_at, merged_from, merge_seq, category, quantity, added_at,
		checkout_order, checkout_until, merge_into, logical_cart, snapshot, snapshot_at, WRITETIME(quantity)`

func newCartTable(name, key string) cartTable {
	cols := cartCols
	header := fmt.Sprintf(`WHERE %s = ? AND cart_id = ? AND product_id = ''`, key)
	return cartTable{name: name, key: key, stmts: cartStmts{
		// Newest cart first: the active cart is normally the first prefix of the partition,
		// header row ('') first. Enough rows for a full cart plus a few racing inserts.
		read:     fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ? LIMIT %d`, cols, name, key, cart.MaxItems+11),
		readCart: fmt.Sprintf(`SELECT %s FROM %s WHERE %s = ? AND cart_id = ? LIMIT %d`, cols, name, key, cart.MaxItems+11),
		// A cart's header, or a new generation's: logical_cart null is the cart's own id.
		create: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = ?, logical_cart = ?, status = 'active', created_at = ?, updated_at = ?, expires_at = ?,
			merged_from = ?, merge_seq = ? %s IF active_cart = ?`, name, header),
		// Lines: plain writes at a client timestamp, never by a lightweight transaction.
		line: fmt.Sprintf(`UPDATE %s USING TTL ? AND TIMESTAMP ? SET category = ?, quantity = ?, added_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = ?`, name, key),
		// A removal is a 0-quantity line: a write with a timestamp a snapshot can hold.
		removal: fmt.Sprintf(`UPDATE %s USING TTL ? AND TIMESTAMP ? SET quantity = 0 WHERE %s = ? AND cart_id = ? AND product_id = ?`, name, key),
		order: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = null, status = 'ordered', order_id = ?, updated_at = ?
			%s IF active_cart = ?`, name, header),
		abandon: fmt.Sprintf(`UPDATE %s USING TTL ? SET active_cart = null, status = 'abandoned', updated_at = ?
			%s IF active_cart = ?`, name, header),
		freeze:  fmt.Sprintf(`UPDATE %s USING TTL ? SET checkout_order = ?, checkout_until = ? %s %s`, name, header, editIf),
		publish: fmt.Sprintf(`UPDATE %s USING TTL ? SET snapshot = ?, snapshot_at = ? %s %s AND snapshot_at = null`, name, header, heldIf),
		// Ends a held generation in the batch whose create statement switches active_cart away.
		retire: fmt.Sprintf(`UPDATE %s USING TTL ? SET status = ?, updated_at = ? %s %s`, name, header, heldIf),
		mergeFreeze: fmt.Sprintf(`UPDATE %s USING TTL ? SET status = 'merging', merge_into = ?, updated_at = ?
			%s IF active_cart = ? AND status = 'active' AND expires_at > ?`, name, header),
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
	owner  cart.Owner
	active gocql.UUID // the active cart's physical id, its generation (zero: no active cart)
	gen    gocql.UUID // the physical cart the rows read were of: active, unless read by id
	newest gocql.UUID // newest physical cart id in the partition (zero: none)
	header bool       // the active cart's header row was read
	// c is the cart as the API shows it: ID its logical id, Items its live lines, or while a
	// freeze holds it and has published its snapshot, the snapshot's.
	c cart.Cart
	// lines are every line of the generation, removals (0) included, with their writetimes.
	lines []snapLine
	// snapshot is what the freeze holding the cart read, once published.
	snapshot  []snapLine
	published bool
	merged    map[string]bool
	mergeSeq  *int
	// mergeInto is the user a login is moving this (guest) cart to while it is merging.
	mergeInto string
	// The newest cart's header when there is no active cart: an abandoned guest cart that has
	// not expired is one a login merged.
	newestStatus  cart.Status
	newestExpires time.Time
}

// physical is the physical cart (generation) st describes.
func (st cartState) physical() gocql.UUID { return st.gen }

func (st cartState) hasActive() bool { return st.active != (gocql.UUID{}) && st.header }

// live reports whether the active cart is visible at now (a guest cart dies with its session).
func (st cartState) live(now time.Time) bool {
	return st.hasActive() && st.c.Status == cart.Active && unexpired(st.c.ExpiresAt, now)
}

// held reports a generation a freeze took: a checkout's (or a login's merge into it), or a
// login's of a guest cart. Its lines can no longer change what any order or merge holds:
// the snapshot decides.
func (st cartState) held() bool { return st.c.CheckoutOrder != "" || st.mergeInto != "" }

// mergeTokenPrefix marks checkout_order as a login's merge into a user's cart, not an order.
const mergeTokenPrefix = "merge:"

func mergeToken(guestCart string) string { return mergeTokenPrefix + guestCart }

// mergingIn reports a user's cart a login is merging a guest cart into.
func (st cartState) mergingIn() bool { return strings.HasPrefix(st.c.CheckoutOrder, mergeTokenPrefix) }

func unexpired(exp, now time.Time) bool { return exp.IsZero() || exp.After(now) }

// mergedAway reports a guest whose cart a login is merging or has merged: its changes would
// land in a cart nobody sees again.
func (st cartState) mergedAway(now time.Time) bool {
	if !st.owner.IsGuest() {
		return false
	}
	if st.hasActive() {
		return st.c.Status == merging && unexpired(st.c.ExpiresAt, now)
	}
	return st.active == (gocql.UUID{}) && st.newestStatus == cart.Abandoned && st.newestExpires.After(now)
}

// snapLine is a line with the writetime of its quantity, as a snapshot holds it (cart_line).
type snapLine struct {
	ProductID string    `cql:"product_id"`
	Category  string    `cql:"category"`
	Quantity  int64     `cql:"quantity"`
	AddedAt   time.Time `cql:"added_at"`
	Written   int64     `cql:"written"`
}

// liveItems are the lines of ls that are in the cart (a 0 quantity is a removal).
func liveItems(ls []snapLine) []cart.Item {
	var items []cart.Item
	for _, l := range ls {
		if l.Quantity > 0 {
			items = append(items, cart.Item{ProductID: l.ProductID, Category: l.Category, Quantity: l.Quantity, AddedAt: l.AddedAt})
		}
	}
	sortItems(items)
	return items
}

// holds reports whether ls holds the write of productID made at timestamp at (or a later one).
func holds(ls []snapLine, productID string, at int64) bool {
	for _, l := range ls {
		if l.ProductID == productID {
			return l.Written >= at
		}
	}
	return false
}

type cartRow struct {
	active, cartID, logical            gocql.UUID
	productID, status, orderID         string
	created, updated, expires, addedAt time.Time
	merged                             []string
	mergeSeq                           *int
	category                           string
	quantity, written                  int64
	checkoutOrder, mergeInto           string
	checkoutUntil, snapshotAt          time.Time
	snapshot                           []snapLine
}

// dest is where a row of cartCols scans to.
func (r *cartRow) dest() []any {
	return []any{&r.active, &r.cartID, &r.productID, &r.status, &r.orderID, &r.created, &r.updated, &r.expires,
		&r.merged, &r.mergeSeq, &r.category, &r.quantity, &r.addedAt, &r.checkoutOrder, &r.checkoutUntil, &r.mergeInto,
		&r.logical, &r.snapshot, &r.snapshotAt, &r.written}
}

func scanCartRows(iter *gocql.Iter) ([]cartRow, error) {
	var rows []cartRow
	for {
		var r cartRow
		if !iter.Scan(r.dest()...) {
			break
		}
		rows = append(rows, r)
	}
	return rows, iter.Close()
}

// load reads the owner's partition at cl: QUORUM normally, SERIAL after a conditional write
// was refused or timed out, so the decision that follows sees what Paxos last committed.
func (r *carts) load(ctx context.Context, owner cart.Owner, cl gocql.Consistency) (cartState, error) {
	t, key := tableFor(owner)
	st := cartState{owner: owner}
	rows, err := scanCartRows(r.p.idempotent(ctx, r.s.Query(t.stmts.read, key).Consistency(cl)).Iter())
	if err != nil {
		return st, fmt.Errorf("read %s cart: %w", owner.Key(), err)
	}
	if len(rows) == 0 {
		return st, nil
	}
	st.active, st.newest = rows[0].active, rows[0].cartID
	if st.active == (gocql.UUID{}) {
		// The newest cart's header: lines ahead of it are a cart never created (written for a
		// creation or a switch that lost its LWT).
		for _, row := range rows {
			if row.productID == "" {
				st.newestStatus, st.newestExpires = cart.Status(row.status), row.expires
				break
			}
		}
		return st, nil
	}
	var mine []cartRow
	for _, row := range rows {
		if row.cartID == st.active {
			mine = append(mine, row)
		}
	}
	// The active cart is not the newest prefix only if clocks went backwards between two
	// carts, a switch to a new generation was abandoned, or the LIMIT cut it: read it by id.
	if len(mine) == 0 || len(mine) == len(rows) && len(rows) == cart.MaxItems+11 {
		if mine, err = r.readCart(ctx, owner, st.active, cl); err != nil {
			return st, err
		}
	}
	st.gen = st.active
	st.fill(mine)
	r.remember(st)
	return st, nil
}

// readCart reads every row of physical cart id (no LIMIT: removals stay as rows).
func (r *carts) readCart(ctx context.Context, owner cart.Owner, id gocql.UUID, cl gocql.Consistency) ([]cartRow, error) {
	t, key := tableFor(owner)
	rows, err := scanCartRows(r.p.idempotent(ctx, r.s.Query(t.stmts.readCart, key, id).Consistency(cl)).Iter())
	if err != nil {
		return nil, fmt.Errorf("read %s cart: %w", owner.Key(), err)
	}
	return rows, nil
}

// readState reads physical cart id at cl and returns the state its rows tell.
func (r *carts) readState(ctx context.Context, owner cart.Owner, id gocql.UUID, cl gocql.Consistency) (cartState, error) {
	rows, err := r.readCart(ctx, owner, id, cl)
	if err != nil {
		return cartState{owner: owner}, err
	}
	return stateOf(owner, id, rows), nil
}

// stateOf is the state rows of physical cart id (read by readCart) tell: active is the
// partition's active_cart, which may name another cart.
func stateOf(owner cart.Owner, id gocql.UUID, rows []cartRow) cartState {
	st := cartState{owner: owner, active: id, newest: id, gen: id}
	st.fill(rows)
	if len(rows) > 0 {
		st.active = rows[0].active
	}
	return st
}

// fill sets st's cart from the rows of one physical cart.
func (st *cartState) fill(rows []cartRow) {
	st.c = cart.Cart{ID: st.gen.String(), Owner: st.owner}
	st.lines = nil
	for _, row := range rows {
		if row.productID != "" {
			st.lines = append(st.lines, snapLine{ProductID: row.productID, Category: row.category, Quantity: row.quantity, AddedAt: row.addedAt, Written: row.written})
			continue
		}
		row.addTo(&st.c)
		st.header = true
		if row.logical != (gocql.UUID{}) {
			st.c.ID = row.logical.String()
		}
		st.merged = map[string]bool{}
		for _, m := range row.merged {
			st.merged[m] = true
		}
		st.mergeSeq, st.mergeInto = row.mergeSeq, row.mergeInto
		st.snapshot, st.published = row.snapshot, !row.snapshotAt.IsZero()
	}
	if st.held() && st.published {
		st.c.Items = liveItems(st.snapshot)
	} else {
		st.c.Items = liveItems(st.lines)
	}
}

// activeCartsSize bounds the owners whose active cart a process remembers (about 100 B
// plus 40 B a line each): the shoppers active in the last minutes of a busy shop.
const activeCartsSize = 1 << 16

// cartHint is what a process remembers of an owner's active cart: the generation edits write
// into, its expiry (a guest line's TTL) and when each of its lines was added.
type cartHint struct {
	id      gocql.UUID
	expires time.Time
	added   map[string]time.Time
}

func newActiveCarts() *lru.Cache[string, cartHint] {
	c, err := lru.New[string, cartHint](activeCartsSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return c
}

// remember notes st's active cart as the owner's, for loadActive and the edits.
func (r *carts) remember(st cartState) {
	if r.activeCarts != nil && st.hasActive() && st.active == st.gen && st.c.Status == cart.Active {
		h := cartHint{id: st.gen, expires: st.c.ExpiresAt, added: make(map[string]time.Time, len(st.c.Items))}
		for _, it := range st.c.Items {
			h.added[it.ProductID] = it.AddedAt
		}
		r.activeCarts.Add(st.owner.Key(), h)
	}
}

// forget drops owner's remembered active cart once this process ended it.
func (r *carts) forget(owner cart.Owner) {
	if r.activeCarts != nil {
		r.activeCarts.Remove(owner.Key())
	}
}

func (r *carts) hint(owner cart.Owner) (cartHint, bool) {
	if r.activeCarts == nil {
		return cartHint{}, false
	}
	return r.activeCarts.Get(owner.Key())
}

// loadActive is load for callers that use only a live active cart (ActiveCart, edits,
// BeginCheckout). A partition holds every earlier cart of its owner behind the active one,
// so load's read of its head returns up to 111 rows of them; with the id of the active cart
// this process last saw, loadActive reads that cart's rows alone, by exact key. Every row
// carries the partition's static active_cart as it is now, read at the same level and in
// the same read, so the hint is checked, not trusted: only a live cart that is still the
// owner's active one is returned (the state load would return for it, newest = that cart,
// which no caller of a live cart uses). Anything else (no hint, another process ended or
// replaced the cart, an expired guest cart, a merge) is load's to decide.
func (r *carts) loadActive(ctx context.Context, owner cart.Owner, cl gocql.Consistency, now time.Time) (cartState, error) {
	if h, ok := r.hint(owner); ok {
		rows, err := r.readCart(ctx, owner, h.id, cl)
		if err != nil {
			return cartState{owner: owner}, err
		}
		if len(rows) > 0 && rows[0].active == h.id {
			st := stateOf(owner, h.id, rows)
			if st.live(now) {
				return st, nil
			}
		}
	}
	return r.load(ctx, owner, cl)
}

func sortItems(items []cart.Item) {
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].AddedAt.Equal(items[j].AddedAt) {
			return items[i].AddedAt.Before(items[j].AddedAt)
		}
		return items[i].ProductID < items[j].ProductID
	})
}

// ActiveCart reads the owner's cart; one a freeze holds shows the lines its snapshot holds
// (settled waits for it), never a refused edit's.
func (r *carts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	st, err := r.settled(ctx, owner, now)
	if err != nil {
		return cart.Cart{}, err
	}
	if !st.live(now) {
		return cart.Cart{}, cart.ErrNotFound
	}
	return st.c, nil
}

func (r *carts) batch(ctx context.Context) *gocql.Batch {
	return r.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(r.p.levels().Carts).SerialConsistency(r.p.levels().Serial)
}

func (r *carts) query(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return r.s.Query(stmt, args...).WithContext(ctx).Consistency(r.p.levels().Carts).SerialConsistency(r.p.levels().Serial)
}

// ensureActive returns the owner's active cart, creating one (LWT) if there is none. The cart
// it returns may be frozen: the caller applies Editable. A guest whose cart a login merged
// gets ErrGuestMerged instead of a new cart nobody would see.
func (r *carts) ensureActive(ctx context.Context, owner cart.Owner, expiresAt, now time.Time, cl gocql.Consistency) (cartState, error) {
	st, _, err := r.createWith(ctx, owner, expiresAt, now, cl, nil, nil, nil)
	return st, err
}

// createWith is ensureActive creating the cart with lines and merged_from (a first edit's line,
// a merge's lines): they are written first, by plain writes into the new physical cart, which
// no reader or freeze can know before the LWT creating it, so every later read holds them. It
// reports whether it created the cart with them (else they are in no cart). seen, when set,
// is the owner's partition as the caller just read it, which the first round decides on.
func (r *carts) createWith(ctx context.Context, owner cart.Owner, expiresAt, now time.Time, cl gocql.Consistency, lines []snapLine, merged []string, seen *cartState) (cartState, bool, error) {
	t, key := tableFor(owner)
	if owner.IsGuest() && expiresAt.IsZero() {
		return cartState{}, false, errors.New("cassandra carts: a guest cart needs its session's expiry")
	}
	if !owner.IsGuest() {
		expiresAt = time.Time{}
	}
	var written gocql.UUID // the physical cart lines were written into
	created := false
	st, err := casLoop(ctx, r.p, fmt.Sprintf("create %s cart", owner.Key()), func(ctx context.Context, a casAttempt) (cartState, *casOp[cartState], error) {
		if a.n > 0 {
			cl = a.cl
		}
		var st cartState
		var err error
		if a.n == 0 && seen != nil {
			st = *seen
		} else {
			st, err = r.loadActive(ctx, owner, cl, now)
		}
		if err == nil && a.unknown && st.hasActive() && st.active == written && written != (gocql.UUID{}) {
			created = true // an attempt whose answer was lost did create it
			return st, nil, nil
		}
		if err != nil || st.live(now) {
			return st, nil, err
		}
		if st.mergedAway(now) {
			return st, nil, cart.ErrGuestMerged
		}
		// Otherwise someone else created (or ended) a cart meanwhile, or an outcome is unknown.
		id := newCartID(st, now)
		ttl := ttlUntil(expiresAt, time.Now())
		if len(lines) > 0 && id != written {
			if err := r.writeLines(ctx, owner, id, ttl, lines); err != nil {
				return st, nil, err
			}
			written = id
		}
		var prev any
		if st.active != (gocql.UUID{}) {
			prev = st.active // an expired guest cart or a header lost to TTL: replace it
		}
		var seq any
		if merged != nil {
			seq = 1
		}
		n := now.UTC().Truncate(time.Millisecond)
		q := r.query(ctx, t.stmts.create, ttl, id, nil, n, n, ts(expiresAt), merged, seq, key, id, prev)
		return st, &casOp[cartState]{query: q, applied: func() cartState {
			c := cartState{owner: owner, active: id, newest: id, gen: id, header: true, merged: map[string]bool{}, lines: lines,
				c: cart.Cart{ID: id.String(), Owner: owner, Status: cart.Active, Items: liveItems(lines), CreatedAt: n, UpdatedAt: n, ExpiresAt: expiresAt.UTC().Truncate(time.Millisecond)}}
			for _, m := range merged {
				c.merged[m] = true
			}
			created = len(lines) > 0
			r.remember(c)
			return c
		}}, nil
	})
	return st, created, err
}

// writeLines writes lines (live ones; a line without a writetime gets one) into physical
// cart id, in one unlogged batch on the owner's partition.
func (r *carts) writeLines(ctx context.Context, owner cart.Owner, id gocql.UUID, ttl int, lines []snapLine) error {
	t, key := tableFor(owner)
	b := r.batch(ctx)
	for _, l := range lines {
		if l.Quantity <= 0 {
			continue
		}
		if l.Written == 0 {
			l.Written = nextLineTS()
		}
		b.Query(t.stmts.line, ttl, l.Written, l.Category, l.Quantity, ts(l.AddedAt), key, id, l.ProductID)
	}
	if len(b.Entries) == 0 {
		return nil
	}
	if err := r.p.idempotentBatch(ctx, b).Exec(); err != nil {
		return fmt.Errorf("write the lines of %s cart %s: %w", owner.Key(), id, err)
	}
	return nil
}

// newCartID sorts before (DESC) every older cart of the owner even if this clock lags. Its
// other bits are random: two callers creating a cart (or a generation) at the same instant
// never pick the same id, so lines written into an id before its creation are only ever its
// creator's.
func newCartID(st cartState, now time.Time) gocql.UUID {
	at := now
	if st.newest != (gocql.UUID{}) && !at.After(st.newest.Time()) {
		at = st.newest.Time().Add(time.Millisecond)
	}
	id := gocql.UUIDFromTime(at)
	var rnd [8]byte
	_, _ = crand.Read(rnd[:])
	copy(id[8:], rnd[:])
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

func (r *carts) PutItem(ctx context.Context, owner cart.Owner, item cart.Item, expiresAt, now time.Time) (cart.Cart, error) {
	if err := cart.ValidateQuantity(item.Quantity); err != nil {
		return cart.Cart{}, err
	}
	item.AddedAt = item.AddedAt.UTC().Truncate(time.Millisecond)
	if item.AddedAt.IsZero() {
		item.AddedAt = now.UTC().Truncate(time.Millisecond)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	return r.edit(ctx, owner, snapLine{ProductID: item.ProductID, Category: item.Category, Quantity: item.Quantity, AddedAt: item.AddedAt}, expiresAt, now)
}

func (r *carts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (cart.Cart, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	return r.edit(ctx, owner, snapLine{ProductID: productID}, time.Time{}, now)
}

// PurgeExpired has nothing to do: every guest-cart cell carries a TTL ending at the session's
// expiry, so Cassandra drops expired carts itself (compaction then removes them from disk).
func (r *carts) PurgeExpired(ctx context.Context, now time.Time) (int, error) { return 0, nil }
