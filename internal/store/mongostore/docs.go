package mongostore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/session"
)

// Money is stored as a BSON int64 of cents (money.Amount), never a double: exact, summable
// with $inc/$sum, range-filterable and sortable by the category_price_id index. Decimal128 would
// also be exact, but the driver's Decimal128 has no arithmetic, the domain already holds
// integer cents, and no price needs a fraction of a cent. A double written by hand (mongosh
// writes 19.99 as a double) is refused on decode rather than rounded: the driver decodes a
// double into an int64 field only when it has no fractional part.
func cents(a money.Amount) int64 { return int64(a) }

// Field names are the data model's (docs/mongodb.md): order_date, total_price,
// geo_zone, items[].product_id/category/price, stock, attributes[{key, value}], carts'
// user_id/session_id/status/items/expires_at, sessions' ip_address/user_agent/last_active.

type kvDoc struct {
	Key   string `bson:"key"`
	Value string `bson:"value"`
}

// toKV stores a free-form map as [{key, value}] (the attribute pattern): user-chosen keys
// may hold "." or "$", which do not belong in field names, and the array form is indexable.
func toKV(m map[string]string) []kvDoc {
	out := make([]kvDoc, 0, len(m))
	for k, v := range m {
		out = append(out, kvDoc{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func fromKV(kv []kvDoc) map[string]string {
	if len(kv) == 0 {
		return nil
	}
	m := make(map[string]string, len(kv))
	for _, p := range kv {
		m[p.Key] = p.Value
	}
	return m
}

// productDoc is one products document. Stock is a sub-document keyed by zone ({eu: 5}) rather
// than a [{zone, quantity}] array: one `$inc: {"stock.eu": -n}` with the guard
// `"stock.eu": {$gte: n}` in the filter takes stock atomically, and the same $inc creates a new
// zone; the array would need $elemMatch with a positional update plus a separate $push for a
// new zone. Zone names are validated slugs, so they are safe field names.
type productDoc struct {
	ID       string `bson:"_id"`
	Category string `bson:"category"`
	Name     string `bson:"name"`
	// Description and Inactive are left out when empty: documents written before they existed
	// read the same (active, no description).
	Description string           `bson:"description,omitempty"`
	Inactive    bool             `bson:"inactive,omitempty"`
	Price       int64            `bson:"price"`
	Attributes  []kvDoc          `bson:"attributes"`
	Stock       map[string]int64 `bson:"stock"`
	CreatedAt   time.Time        `bson:"created_at"`
	UpdatedAt   time.Time        `bson:"updated_at"`
}

func toProductDoc(p catalog.Product) productDoc {
	stock := make(map[string]int64, len(p.Stock))
	for z, q := range p.Stock {
		stock[z] = q
	}
	return productDoc{ID: p.ID, Category: p.Category, Name: p.Name, Description: p.Description, Inactive: p.Inactive, Price: cents(p.Price),
		Attributes: toKV(p.Attributes), Stock: stock, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func (d productDoc) product() catalog.Product {
	stock := make(map[string]int64, len(d.Stock))
	for z, q := range d.Stock {
		stock[z] = q
	}
	return catalog.Product{ID: d.ID, Name: d.Name, Description: d.Description, Inactive: d.Inactive, Category: d.Category, Price: money.Amount(d.Price),
		Attributes: fromKV(d.Attributes), Stock: stock, CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
}

type orderItemDoc struct {
	ProductID string `bson:"product_id"`
	Category  string `bson:"category"`
	Name      string `bson:"name"`
	Quantity  int64  `bson:"quantity"`
	Price     int64  `bson:"price"` // unit price in cents
}

// orderDoc is one orders document; user_id is the shard key.
type orderDoc struct {
	ID        string         `bson:"_id"`
	UserID    string         `bson:"user_id"`
	CartID    string         `bson:"cart_id"`
	Zone      string         `bson:"geo_zone"`
	Items     []orderItemDoc `bson:"items"`
	Total     int64          `bson:"total_price"`
	Status    string         `bson:"status"`
	IdemKey   string         `bson:"idem_key"`
	OrderDate time.Time      `bson:"order_date"`
	UpdatedAt time.Time      `bson:"updated_at"`
}

func toItemDocs(items []order.Item) []orderItemDoc {
	out := make([]orderItemDoc, len(items))
	for i, it := range items {
		out[i] = orderItemDoc{ProductID: it.ProductID, Category: it.Category, Name: it.Name,
			Quantity: it.Quantity, Price: cents(it.UnitPrice)}
	}
	return out
}

func fromItemDocs(items []orderItemDoc) []order.Item {
	out := make([]order.Item, len(items))
	for i, it := range items {
		out[i] = order.Item{ProductID: it.ProductID, Category: it.Category, Name: it.Name,
			Quantity: it.Quantity, UnitPrice: money.Amount(it.Price)}
	}
	return out
}

func toOrderDoc(o order.Order) orderDoc {
	return orderDoc{ID: o.ID, UserID: o.UserID, CartID: o.CartID, Zone: o.Zone, Items: toItemDocs(o.Items),
		Total: cents(o.Total), Status: string(o.Status), IdemKey: o.IdempotencyKey,
		OrderDate: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

func (d orderDoc) order() order.Order {
	return order.Order{ID: d.ID, UserID: d.UserID, CartID: d.CartID, Zone: d.Zone, Items: fromItemDocs(d.Items),
		Total: money.Amount(d.Total), Status: order.Status(d.Status), IdempotencyKey: d.IdemKey,
		CreatedAt: d.OrderDate.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
}

// claimDoc reserves a cluster-wide unique value: its _id (see package doc).
type claimDoc struct {
	ID       string    `bson:"_id"`
	UserID   string    `bson:"user_id,omitempty"`
	OrderID  string    `bson:"order_id,omitempty"`
	Category string    `bson:"category,omitempty"` // product claims: where the product lives
	At       time.Time `bson:"at"`
}

// Claim ids. The key claim hashes (user, key) with the user's length in front, so no pair of
// different (user, key) can spell the same input, and the id has a fixed size whatever the
// 128-character Idempotency-Key holds.
func keyClaimID(userID, key string) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(len(userID)) + ":" + userID + key))
	return "k:" + hex.EncodeToString(sum[:])
}
func cartClaimID(cartID string) string       { return "c:" + cartID }
func orderClaimID(orderID string) string     { return "o:" + orderID }
func productClaimID(productID string) string { return "p:" + productID }

type cartItemDoc struct {
	ProductID string    `bson:"product_id"`
	Category  string    `bson:"category"`
	Quantity  int64     `bson:"quantity"`
	AddedAt   time.Time `bson:"added_at"`
}

// cartDoc is one carts document. An owner's current cart lives at the owner-derived _id
// activeCartID(owner) (its "slot"); its own identity is cart_id. When a new cart replaces an
// ordered or abandoned one, the old one is first copied to _id = cart_id (retired). See carts.go.
type cartDoc struct {
	ID        string        `bson:"_id"`
	CartID    string        `bson:"cart_id"`
	UserID    *string       `bson:"user_id"`    // null for a guest cart
	SessionID *string       `bson:"session_id"` // null for a user cart
	Status    string        `bson:"status"`
	Items     []cartItemDoc `bson:"items"`
	OrderID   string        `bson:"order_id,omitempty"`
	CreatedAt time.Time     `bson:"created_at"`
	UpdatedAt time.Time     `bson:"updated_at"`
	// ExpiresAt is absent for user carts, so the TTL index never touches them.
	ExpiresAt *time.Time `bson:"expires_at,omitempty"`
	// CheckoutOrder and CheckoutUntil are present only while a checkout holds the cart.
	CheckoutOrder string     `bson:"checkout_order,omitempty"`
	CheckoutUntil *time.Time `bson:"checkout_until,omitempty"`
}

// activeCartID is the owner's cart slot: derived from the owner, so "the active cart of user
// or session X" is a lookup by the shard key {_id: "hashed"}, one shard, one round trip.
func activeCartID(o cart.Owner) string { return "active:" + o.Key() }

func (d cartDoc) owner() cart.Owner {
	if d.UserID != nil {
		return cart.User(*d.UserID)
	}
	if d.SessionID != nil {
		return cart.Guest(*d.SessionID)
	}
	return cart.Owner{}
}

func (d cartDoc) cart() cart.Cart {
	c := cart.Cart{ID: d.CartID, Owner: d.owner(), Status: cart.Status(d.Status), OrderID: d.OrderID,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
	if d.ExpiresAt != nil {
		c.ExpiresAt = d.ExpiresAt.UTC()
	}
	if d.CheckoutUntil != nil {
		c.CheckoutOrder, c.CheckoutUntil = d.CheckoutOrder, d.CheckoutUntil.UTC()
	}
	for _, it := range d.Items {
		c.Items = append(c.Items, cart.Item{ProductID: it.ProductID, Category: it.Category,
			Quantity: it.Quantity, AddedAt: it.AddedAt.UTC()})
	}
	return c
}

// live reports whether the cart is active and not past its expiry at now.
func (d cartDoc) live(now time.Time) bool {
	return d.Status == string(cart.Active) && (d.ExpiresAt == nil || d.ExpiresAt.After(now))
}

func newCartDoc(owner cart.Owner, cartID string, expiresAt, now time.Time) cartDoc {
	doc := cartDoc{ID: activeCartID(owner), CartID: cartID, Status: string(cart.Active),
		Items: []cartItemDoc{}, CreatedAt: now, UpdatedAt: now}
	if owner.IsGuest() {
		sid := owner.SessionID
		doc.SessionID = &sid
	} else {
		uid := owner.UserID
		doc.UserID = &uid
	}
	if !expiresAt.IsZero() {
		exp := expiresAt
		doc.ExpiresAt = &exp
	}
	return doc
}

type sessionDoc struct {
	ID         string    `bson:"_id"`
	UserID     *string   `bson:"user_id"` // null while anonymous
	CreatedAt  time.Time `bson:"created_at"`
	LastActive time.Time `bson:"last_active"`
	ExpiresAt  time.Time `bson:"expires_at"`
	IP         string    `bson:"ip_address"`
	UserAgent  string    `bson:"user_agent"`
	Status     string    `bson:"status"`
	Data       []kvDoc   `bson:"data"`
}

func toSessionDoc(s session.Session) sessionDoc {
	doc := sessionDoc{ID: s.ID, CreatedAt: s.CreatedAt, LastActive: s.LastActive, ExpiresAt: s.ExpiresAt,
		IP: s.IP, UserAgent: s.UserAgent, Status: string(s.Status), Data: toKV(s.Data)}
	if s.UserID != "" {
		u := s.UserID
		doc.UserID = &u
	}
	return doc
}

func (d sessionDoc) session() session.Session {
	s := session.Session{ID: d.ID, CreatedAt: d.CreatedAt.UTC(), LastActive: d.LastActive.UTC(),
		ExpiresAt: d.ExpiresAt.UTC(), IP: d.IP, UserAgent: d.UserAgent, Status: session.Status(d.Status),
		Data: fromKV(d.Data)}
	if d.UserID != nil {
		s.UserID = *d.UserID
	}
	return s
}

// eventDoc is one events document. Its _id is an ObjectId built from the event itself
// (eventObjectID), so the spec's ascending {_id: 1} firehose key still sends new events to the
// fast zone, _id order is time order (newest first is a sort on _id alone, which the spec's
// user_newest index and actor_newest serve), and re-appending the same event is a duplicate.
type eventDoc struct {
	ID        bson.ObjectID `bson:"_id"`
	EventID   string        `bson:"event_id"`
	Actor     string        `bson:"user_id"` // the owner key "u:<id>"/"s:<session>"; the spec's field name
	Type      string        `bson:"type"`
	At        time.Time     `bson:"at"`
	ProductID string        `bson:"product_id,omitempty"`
	Details   []kvDoc       `bson:"details"`
}

// eventObjectID lays out 12 bytes that sort like (At, then a tie-breaker): 4 bytes of Unix
// seconds (exactly where an ObjectId keeps its timestamp, so the firehose's day boundaries,
// which are ObjectIds of midnight with zero tails, still split correctly), 2 bytes of
// milliseconds, and 6 bytes of SHA-256(actor, event id) that make the id deterministic.
func eventObjectID(actor, eventID string, at time.Time) (bson.ObjectID, error) {
	var id bson.ObjectID
	secs := at.Unix()
	if secs < 0 || secs > int64(^uint32(0)) {
		return id, fmt.Errorf("event time %v outside 1970-2106, the range an ObjectId can hold", at)
	}
	id = timeObjectID(at)
	sum := sha256.Sum256([]byte(strconv.Itoa(len(actor)) + ":" + actor + eventID))
	copy(id[6:], sum[:6])
	return id, nil
}

// timeObjectID is the smallest event _id of instant t (to the millisecond): seconds, then
// milliseconds, then zeros where an event's actor hash goes. Events sort by it like by time.
func timeObjectID(t time.Time) bson.ObjectID {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[0:4], uint32(t.Unix()))
	binary.BigEndian.PutUint16(id[4:6], uint16(t.Nanosecond()/int(time.Millisecond)))
	return id
}

// dayBounds are the ObjectIds bounding one UTC day: [lo, hi).
func dayBounds(day time.Time) (lo, hi bson.ObjectID) {
	start := event.Day(day)
	return timeObjectID(start), timeObjectID(start.Add(24 * time.Hour))
}

func (d eventDoc) event() event.Event {
	return event.Event{ID: d.EventID, Actor: d.Actor, Type: event.Type(d.Type), At: d.At.UTC(),
		ProductID: d.ProductID, Details: fromKV(d.Details)}
}

type historyDoc struct {
	ID        string         `bson:"_id"` // the order id
	UserID    string         `bson:"user_id"`
	PlacedAt  time.Time      `bson:"placed_at"`
	UpdatedAt time.Time      `bson:"updated_at"`
	Status    string         `bson:"status"`
	Zone      string         `bson:"geo_zone"`
	Total     int64          `bson:"total_price"`
	Items     []orderItemDoc `bson:"items"`
}

func toHistoryDoc(h history.Entry) historyDoc {
	return historyDoc{ID: h.OrderID, UserID: h.UserID, PlacedAt: h.PlacedAt, UpdatedAt: h.UpdatedAt,
		Status: string(h.Status), Zone: h.Zone, Total: cents(h.Total), Items: toItemDocs(h.Items)}
}

func (d historyDoc) entry() history.Entry {
	return history.Entry{UserID: d.UserID, OrderID: d.ID, PlacedAt: d.PlacedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		Status: order.Status(d.Status), Zone: d.Zone, Total: money.Amount(d.Total), Items: fromItemDocs(d.Items)}
}

// userDoc is keyed by the (normalised) email: the unique value is the _id, so uniqueness holds
// cluster-wide even with users sharded on {_id: "hashed"}, and login is a targeted lookup.
type userDoc struct {
	Email        string    `bson:"_id"`
	UserID       string    `bson:"user_id"`
	PasswordHash string    `bson:"password_hash"`
	CreatedAt    time.Time `bson:"created_at"`
}
