package mongostore

import (
	"bytes"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/validation"
)

// The filters and updates every repository sends, as pure functions: filters_test.go checks
// that each one that can be targeted carries the shard key. Shard keys (SHD-1):
// orders {user_id: hashed}, products {category: 1, _id: 1}, carts {_id: hashed},
// sessions {_id: hashed}, events {_id: 1}, order_history {user_id: hashed}, claims {_id: hashed}.

// --- products ---

// productKey is the full products shard key: a stock update by _id alone would be a broadcast
// under {category, _id}; the category is on every order and cart line.
func productKey(ref catalog.Ref) bson.D { return d(e("category", ref.Category), e("_id", ref.ID)) }

// stockPath is the field of one zone's stock; zone must be a validated slug.
func stockPath(zone string) string { return "stock." + zone }

func checkZone(zone string) error {
	if !catalog.ValidSlug(zone) {
		return validation.Field("zone", "must be a zone slug such as \"eu-west\"")
	}
	return nil
}

// takeStockFilter matches the product only while the zone holds at least qty: the guard in the
// filter is the no-oversell rule, evaluated atomically with the $inc by the shard.
func takeStockFilter(ref catalog.Ref, zone string, qty int64) bson.D {
	return append(productKey(ref), e(stockPath(zone), d(e("$gte", qty))))
}

// addStockFilter matches the product only while the zone can take delta more units without
// passing catalog.MaxStock. A zone not stocked yet holds none, so it matches too unless delta
// alone is past the cap.
func addStockFilter(ref catalog.Ref, zone string, delta int64) bson.D {
	room := d(e(stockPath(zone), d(e("$lte", catalog.MaxStock-delta))))
	if delta > catalog.MaxStock {
		return append(productKey(ref), room...)
	}
	return append(productKey(ref), e("$or", bson.A{room, d(e(stockPath(zone), d(e("$exists", false))))}))
}

// stockUpdate adds delta to a zone's stock (creating the zone field on first use).
func stockUpdate(zone string, delta int64) bson.D {
	return d(e("$inc", d(e(stockPath(zone), delta))))
}

// priceCursor is the position of a search page: the last (price, id) returned.
type priceCursor struct {
	Price int64  `json:"p"`
	ID    string `json:"i"`
}

// searchFilter is PRD-2: one category (the shard key's prefix: targeted to the category's
// chunks), a price range, and the keyset position after the cursor.
func searchFilter(q catalog.Search, after *priceCursor) bson.D {
	maxPrice := money.Max
	if q.MaxPrice > 0 {
		maxPrice = q.MaxPrice
	}
	f := d(e("category", q.Category), e("price", d(e("$gte", cents(q.MinPrice)), e("$lte", cents(maxPrice)))), activeOnly)
	if after != nil {
		f = append(f, e("$or", bson.A{
			d(e("price", d(e("$gt", after.Price)))),
			d(e("price", after.Price), e("_id", d(e("$gt", after.ID)))),
		}))
	}
	return f
}

var searchSort = d(e("price", 1), e("_id", 1))

// activeOnly leaves inactive products out of search; a document without the field is active.
var activeOnly = e("inactive", d(e("$ne", true)))

// newestFilter is one category newest first, after a cursor's (created_at, _id).
func newestFilter(category string, after *catalog.NewestPosition) bson.D {
	f := d(e("category", category), activeOnly)
	if after != nil {
		at := time.Unix(0, after.Created).UTC()
		f = append(f, e("$or", bson.A{
			d(e("created_at", d(e("$lt", at)))),
			d(e("created_at", at), e("_id", d(e("$lt", after.ID)))),
		}))
	}
	return f
}

var newestSort = d(e("created_at", -1), e("_id", -1))

// --- orders ---

// orderKey addresses one order by shard key and id.
func orderKey(userID, orderID string) bson.D { return d(e("user_id", userID), e("_id", orderID)) }

// orderStatusFilter changes an order only from the status it was read in (compare-and-set).
func orderStatusFilter(userID, orderID, from string) bson.D {
	return append(orderKey(userID, orderID), e("status", from))
}

// --- carts ---

// ownerFields are a cart's owner fields; they sit in every cart filter so that the filter is
// also targeted under the alternative key {user_id: hashed} (guest carts: user_id null,
// the single hashed value that is that key's downside).
func ownerFields(o cart.Owner) bson.D {
	if o.IsGuest() {
		return d(e("user_id", nil), e("session_id", o.SessionID))
	}
	return d(e("user_id", o.UserID))
}

// cartSlotFilter addresses the owner's cart slot, whatever its state.
func cartSlotFilter(o cart.Owner) bson.D {
	return append(d(e("_id", activeCartID(o))), ownerFields(o)...)
}

// liveCartFilter is CRT-2: the owner's active cart, unless past its expiry. The TTL monitor
// runs only every 60 s, so the filter hides an expired guest cart at once.
func liveCartFilter(o cart.Owner, now time.Time) bson.D {
	return append(cartSlotFilter(o),
		e("status", string(cart.Active)),
		e("$or", bson.A{
			d(e("expires_at", d(e("$exists", false)))),
			d(e("expires_at", d(e("$gt", now)))),
		}))
}

// editableCartFilter is the live cart while no checkout holds it (cart.Cart.Editable): every
// change matches through it, so a change and a freeze are two atomic updates of one document
// and whichever comes second sees the first.
func editableCartFilter(o cart.Owner, now time.Time) bson.D {
	return append(liveCartFilter(o, now), e("checkout_order", d(e("$exists", false))))
}

// putLineFilter matches the editable slot that can take productID: it holds the line, or it has
// room for one more ("items.<MaxItems-1>" does not exist exactly when the array is shorter).
func putLineFilter(o cart.Owner, productID string, now time.Time) bson.D {
	return append(editableCartFilter(o, now), e("$and", bson.A{d(e("$or", bson.A{
		d(e("items.product_id", productID)),
		d(e(fmt.Sprintf("items.%d", cart.MaxItems-1), d(e("$exists", false)))),
	}))}))
}

// putLineUpdate is the update pipeline of a put (CRT-3): the line's quantity if the cart holds
// it, else the line appended; on an upsert's insert every other field comes from fresh, an
// empty new cart in the slot. Values are $literal so that no stored string reads as a path.
func putLineUpdate(line cartItemDoc, fresh cartDoc, now time.Time) bson.A {
	lit := func(v any) bson.D { return d(e("$literal", v)) }
	pid := lit(line.ProductID)
	items := d(e("$ifNull", bson.A{"$items", bson.A{}}))
	set := d(
		e("items", d(e("$cond", bson.A{
			d(e("$in", bson.A{pid, d(e("$ifNull", bson.A{"$items.product_id", bson.A{}}))})),
			d(e("$map", d(e("input", items), e("as", "l"), e("in", d(e("$cond", bson.A{
				d(e("$eq", bson.A{"$$l.product_id", pid})),
				d(e("$mergeObjects", bson.A{"$$l", d(e("quantity", line.Quantity))})),
				"$$l",
			})))))),
			d(e("$concatArrays", bson.A{items, bson.A{lit(line)}})),
		}))),
		e("updated_at", now),
		e("cart_id", d(e("$ifNull", bson.A{"$cart_id", lit(fresh.CartID)}))),
		e("user_id", d(e("$ifNull", bson.A{"$user_id", lit(fresh.UserID)}))),
		e("session_id", d(e("$ifNull", bson.A{"$session_id", lit(fresh.SessionID)}))),
		e("created_at", d(e("$ifNull", bson.A{"$created_at", fresh.CreatedAt}))),
	)
	if fresh.ExpiresAt != nil {
		set = append(set, e("expires_at", d(e("$ifNull", bson.A{"$expires_at", *fresh.ExpiresAt}))))
	}
	return bson.A{d(e("$set", set))}
}

// removeLineUpdate pulls one line (CRT-4); pulling an absent line changes nothing.
func removeLineUpdate(productID string, now time.Time) bson.D {
	return d(e("$pull", d(e("items", d(e("product_id", productID))))), e("$set", d(e("updated_at", now))))
}

// markOrderedFilter matches the owner's slot while it still holds cartID and is not ordered.
func markOrderedFilter(o cart.Owner, cartID string) bson.D {
	return append(cartSlotFilter(o), e("cart_id", cartID), e("status", d(e("$ne", string(cart.Ordered)))))
}

// retiredCartFilter addresses a retired cart (moved to _id = cart id).
func retiredCartFilter(o cart.Owner, cartID string) bson.D {
	return append(d(e("_id", cartID)), ownerFields(o)...)
}

func markOrderedUpdate(orderID string, now time.Time) bson.D {
	return d(e("$set", d(e("status", string(cart.Ordered)), e("order_id", orderID), e("updated_at", now))))
}

// expiredFilter is PurgeExpired's: every document whose expires_at has passed. It has no shard
// key (it cannot: it is a sweep) and is a broadcast, like the TTL monitor it backs up.
func expiredFilter(now time.Time) bson.D {
	return d(e("expires_at", d(e("$lte", now))))
}

// --- sessions ---

func liveSessionFilter(id string, now time.Time) bson.D {
	return d(e("_id", id), e("expires_at", d(e("$gt", now))))
}

// bindSessionFilter matches a live session that is anonymous or already bound to userID, so
// BindUser is one atomic findAndModify.
func bindSessionFilter(id, userID string, now time.Time) bson.D {
	return append(liveSessionFilter(id, now), e("user_id", d(e("$in", bson.A{nil, userID}))))
}

// --- events ---

// eventsFilter is EVT-1: one actor's UTC day, optionally one type, strictly before the cursor.
// The day is an _id range, so under the spec's {_id: 1} firehose key it touches only the chunks
// of that day (targeted to the day's range; the actor is not part of that key).
func eventsFilter(q event.Query, before *bson.ObjectID) bson.D {
	lo, hi := dayBounds(q.Day)
	if before != nil && bytes.Compare(before[:], hi[:]) < 0 {
		hi = *before
	}
	f := d(e("user_id", q.Actor), e("_id", d(e("$gte", lo), e("$lt", hi))))
	if q.Type != "" {
		f = append(f, e("type", string(q.Type)))
	}
	return f
}

var newestFirst = d(e("_id", -1))

// --- order history ---

// historyKey addresses one entry: the user (shard key) and the order id.
func historyKey(userID, orderID string) bson.D { return d(e("user_id", userID), e("_id", orderID)) }

// historyCursor is the position of a history page: the last (placed_at, order id) returned.
type historyCursor struct {
	At int64  `json:"t"` // Unix milliseconds
	ID string `json:"i"`
}

func historyFilter(userID string, before *historyCursor) bson.D {
	f := d(e("user_id", userID))
	if before != nil {
		at := time.UnixMilli(before.At).UTC()
		f = append(f, e("$or", bson.A{
			d(e("placed_at", d(e("$lt", at)))),
			d(e("placed_at", at), e("_id", d(e("$lt", before.ID)))),
		}))
	}
	return f
}

var historySort = d(e("placed_at", -1), e("_id", -1))
