package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/validation"
)

type products Store

func (r *products) store() *Store { return (*Store)(r) }

func checkStockZones(p catalog.Product) error {
	for z := range p.Stock {
		if !catalog.ValidSlug(z) {
			return validation.Field("stock."+z, "zone must be a lower-case slug")
		}
	}
	return nil
}

func (s *Store) appendProductChanged(ctx context.Context, p catalog.Product) error {
	return s.appendProductAt(ctx, p, p.UpdatedAt)
}

// appendStockChanged is product.changed for a stock adjustment, which leaves UpdatedAt alone:
// the row is stamped with the time of the change.
func (s *Store) appendStockChanged(ctx context.Context, p catalog.Product) error {
	return s.appendProductAt(ctx, p, time.Now())
}

func (s *Store) appendProductAt(ctx context.Context, p catalog.Product, at time.Time) error {
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.appendOutbox(ctx, outbox.TopicProductChanged, p.ID, payload, at)
}

// CreateProduct inserts the product claim (global id uniqueness: _id alone is unique only per
// shard under {category, _id}), the product and its outbox event in one transaction.
func (r *products) CreateProduct(ctx context.Context, p catalog.Product) error {
	if err := checkStockZones(p); err != nil {
		return err
	}
	s := r.store()
	return s.inTxn(ctx, func(ctx context.Context) error {
		claim := claimDoc{ID: productClaimID(p.ID), Category: p.Category, At: p.CreatedAt}
		if _, err := s.coll(collClaims).InsertOne(ctx, claim); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return catalog.ErrExists
			}
			return fmt.Errorf("mongo: claim product id: %w", err)
		}
		if _, err := s.coll(collProducts).InsertOne(ctx, toProductDoc(p)); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return catalog.ErrExists
			}
			return fmt.Errorf("mongo: insert product: %w", err)
		}
		return s.appendProductChanged(ctx, p)
	})
}

// CreateProducts inserts the claims, the products and their outbox events of many products in
// one transaction, each collection with one insertMany and each outbox partition's counter
// moved once: a handful of commands per call instead of four per product.
func (r *products) CreateProducts(ctx context.Context, ps []catalog.Product) error {
	if len(ps) == 0 {
		return nil
	}
	claims := make([]any, len(ps))
	docs := make([]any, len(ps))
	msgs := make([]pendingMessage, len(ps))
	for i, p := range ps {
		if err := checkStockZones(p); err != nil {
			return fmt.Errorf("product %s: %w", p.ID, err)
		}
		payload, err := json.Marshal(p)
		if err != nil {
			return err
		}
		claims[i] = claimDoc{ID: productClaimID(p.ID), Category: p.Category, At: p.CreatedAt}
		docs[i] = toProductDoc(p)
		msgs[i] = pendingMessage{topic: outbox.TopicProductChanged, key: p.ID, payload: payload, at: p.UpdatedAt}
	}
	s := r.store()
	return s.inTxn(ctx, func(ctx context.Context) error {
		if _, err := s.coll(collClaims).InsertMany(ctx, claims); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return catalog.ErrExists
			}
			return fmt.Errorf("mongo: claim product ids: %w", err)
		}
		if _, err := s.coll(collProducts).InsertMany(ctx, docs); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return catalog.ErrExists
			}
			return fmt.Errorf("mongo: insert products: %w", err)
		}
		return s.appendOutboxMany(ctx, msgs)
	})
}

// categoryOf reads the product claim: where product id lives. coll decides the read preference.
func categoryOf(ctx context.Context, claims *mongo.Collection, id string) (string, error) {
	var c claimDoc
	found, err := decodeOne(claims.FindOne(ctx, d(e("_id", productClaimID(id)))), &c)
	if err != nil {
		return "", fmt.Errorf("mongo: read product claim %s: %w", id, err)
	}
	if !found {
		return "", catalog.ErrNotFound
	}
	return c.Category, nil
}

// loadProduct reads a product by its full key from coll.
func loadProduct(ctx context.Context, coll *mongo.Collection, ref catalog.Ref) (productDoc, error) {
	var doc productDoc
	found, err := decodeOne(coll.FindOne(ctx, productKey(ref)), &doc)
	if err != nil {
		return doc, fmt.Errorf("mongo: read product %s: %w", ref.ID, err)
	}
	if !found {
		return doc, catalog.ErrNotFound
	}
	return doc, nil
}

// GetProduct is PRD-3 (product page, 5 s budget): the claim gives the category, then the read is
// targeted by the full key. Both reads follow the same routing decision; if the two secondaries
// disagree during a category move, the primary settles it.
func (r *products) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	s := r.store()
	claims, dec := s.reader(collClaims, readrouting.OpProductPage)
	prods := s.routed(collProducts, dec)
	doc, err := s.getProduct(ctx, claims, prods, id)
	if errors.Is(err, catalog.ErrNotFound) && dec.Target == readrouting.Secondary {
		doc, err = s.getProduct(ctx, s.coll(collClaims), s.coll(collProducts), id)
	}
	if err != nil {
		return catalog.Product{}, err
	}
	return doc.product(), nil
}

// CurrentProduct reads a product from the primary, whatever the read table allows a product
// page: the projector copies it into a read model, where a secondary's older copy would stay
// until the product's next change. Linearizable, for the same reason: at read concern local a
// primary cut from its peers, not yet stepped down, answered with writes that were rolled back
// once it rejoined (a stock the history never had), and at majority a primary elected a moment
// ago answered with a price older than one already acknowledged (it had not yet learnt the
// commit point); either would stay in the read model. Costs a majority round trip per read.
func (r *products) CurrentProduct(ctx context.Context, id string) (catalog.Product, error) {
	s := r.store()
	doc, err := s.getProduct(ctx, s.linearizable(collClaims), s.linearizable(collProducts), id)
	if err != nil {
		return catalog.Product{}, err
	}
	return doc.product(), nil
}

// getProduct reads a product by its id alone. Behind a mongos the claim gives the category
// first, so the read is targeted at one shard instead of sent to all. A replica set has one
// copy of the collection and a unique _id index on it: the product is read by _id in one
// round trip, half the time of a product page or a cart line's price.
func (s *Store) getProduct(ctx context.Context, claims, prods *mongo.Collection, id string) (productDoc, error) {
	if s.unsharded {
		var doc productDoc
		found, err := decodeOne(prods.FindOne(ctx, d(e("_id", id))), &doc)
		if err != nil {
			return doc, fmt.Errorf("mongo: read product %s: %w", id, err)
		}
		if !found {
			return doc, catalog.ErrNotFound
		}
		return doc, nil
	}
	cat, err := categoryOf(ctx, claims, id)
	if err != nil {
		return productDoc{}, err
	}
	return loadProduct(ctx, prods, catalog.Ref{ID: id, Category: cat})
}

// UpdateProduct reads, applies update and writes back in one transaction. A category change
// moves the document to another shard-key value: delete under the old key, insert under the new
// one and repoint the claim, all in the same transaction.
func (r *products) UpdateProduct(ctx context.Context, id string, update func(*catalog.Product) error) (catalog.Product, error) {
	s := r.store()
	var out catalog.Product
	err := s.inTxn(ctx, func(ctx context.Context) error {
		cat, err := categoryOf(ctx, s.coll(collClaims), id)
		if err != nil {
			return err
		}
		old := catalog.Ref{ID: id, Category: cat}
		doc, err := loadProduct(ctx, s.coll(collProducts), old)
		if err != nil {
			return err
		}
		p := doc.product()
		if err := update(&p); err != nil {
			return err
		}
		p.ID = id
		if err := checkStockZones(p); err != nil {
			return err
		}
		if p.Category == cat {
			if _, err := s.coll(collProducts).ReplaceOne(ctx, productKey(old), toProductDoc(p)); err != nil {
				return fmt.Errorf("mongo: replace product: %w", err)
			}
		} else {
			if _, err := s.coll(collProducts).DeleteOne(ctx, productKey(old)); err != nil {
				return fmt.Errorf("mongo: move product (delete): %w", err)
			}
			if _, err := s.coll(collProducts).InsertOne(ctx, toProductDoc(p)); err != nil {
				return fmt.Errorf("mongo: move product (insert): %w", err)
			}
			if _, err := s.coll(collClaims).UpdateOne(ctx, d(e("_id", productClaimID(id))),
				d(e("$set", d(e("category", p.Category))))); err != nil {
				return fmt.Errorf("mongo: repoint product claim: %w", err)
			}
		}
		out = p
		return s.appendProductChanged(ctx, p)
	})
	return out, err
}

// SearchProducts is PRD-2 (5 s budget), targeted by category, keyset-paginated on (price, _id).
func (r *products) SearchProducts(ctx context.Context, q catalog.Search) (page paging.Page[catalog.Product], err error) {
	q, err = q.Validate()
	if err != nil {
		return page, err
	}
	coll, _ := r.store().reader(collProducts, readrouting.OpCategorySearch)
	if q.Sort == catalog.SortNewest {
		var after *catalog.NewestPosition
		if q.Page.Cursor != "" {
			pos, err := catalog.DecodeNewest(q.Page.Cursor)
			if err != nil {
				return page, err
			}
			after = &pos
		}
		page, err = findPage(ctx, coll, newestFilter(q.Category, after), newestSort, q.Page.Limit, productDoc.product,
			func(doc productDoc) any { return catalog.NewestCursor(doc.product()) })
		if err != nil {
			return page, fmt.Errorf("mongo: list products newest first: %w", err)
		}
		return page, nil
	}
	var after *priceCursor
	if q.Page.Cursor != "" {
		after = &priceCursor{}
		if err := paging.Decode(q.Page.Cursor, after); err != nil {
			return page, err
		}
	}
	page, err = findPage(ctx, coll, searchFilter(q, after), searchSort, q.Page.Limit, productDoc.product,
		func(doc productDoc) any { return priceCursor{Price: doc.Price, ID: doc.ID} })
	if err != nil {
		return page, fmt.Errorf("mongo: search products: %w", err)
	}
	return page, nil
}

// AdjustStock is PRD-1: one findAndModify targeted by {category, _id}, guarded in the filter
// when taking stock (never below zero) and when adding it (never past catalog.MaxStock). It
// reads and writes the primary (stock is primary-only in RPL-1).
func (r *products) AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (int64, error) {
	if err := checkZone(zone); err != nil {
		return 0, err
	}
	// The change goes to the outbox with the product as it now is, so read models and the card
	// cache see admin stock changes as they see every other product change.
	s := r.store()
	var level int64
	err := s.inTxn(ctx, func(ctx context.Context) error {
		doc, err := s.guardedStockChange(ctx, ref, zone, delta, true)
		if err != nil {
			return err
		}
		level = doc.Stock[zone]
		return s.appendStockChanged(ctx, doc.product())
	})
	return level, err
}

// changeStock adds delta to one zone, refusing to go below zero, and returns the product after
// the change; orders take and return stock through it, uncapped (see catalog.MaxStock).
func (s *Store) changeStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (productDoc, error) {
	return s.guardedStockChange(ctx, ref, zone, delta, false)
}

// guardedStockChange is changeStock, and with capped also refuses to pass catalog.MaxStock. It
// works inside a transaction (ctx carries the session) or alone. A ref whose category is stale
// (the product moved) costs one claim lookup and a second try under the right key, never a
// broadcast.
func (s *Store) guardedStockChange(ctx context.Context, ref catalog.Ref, zone string, delta int64, capped bool) (productDoc, error) {
	for attempt := 0; attempt < 2; attempt++ {
		filter := productKey(ref)
		switch {
		case delta < 0:
			filter = takeStockFilter(ref, zone, -delta)
		case capped:
			filter = addStockFilter(ref, zone, delta)
		}
		var doc productDoc
		found, err := decodeOne(s.coll(collProducts).FindOneAndUpdate(ctx, filter, stockUpdate(zone, delta),
			options.FindOneAndUpdate().SetReturnDocument(options.After)), &doc)
		if err != nil {
			return doc, fmt.Errorf("mongo: change stock %s/%s: %w", ref.ID, zone, err)
		}
		if found {
			return doc, nil
		}
		// No match: the product is missing, lives under another category, or the guard refused.
		cur, err := loadProduct(ctx, s.coll(collProducts), ref)
		if err == nil && delta > 0 {
			return doc, &catalog.StockCapError{ProductID: ref.ID, Zone: zone, Delta: delta, Level: cur.Stock[zone]}
		}
		if err == nil {
			return doc, &catalog.InsufficientStockError{ProductID: ref.ID, Zone: zone, Requested: -delta, Available: cur.Stock[zone]}
		}
		if !errors.Is(err, catalog.ErrNotFound) {
			return doc, err
		}
		cat, err := categoryOf(ctx, s.coll(collClaims), ref.ID)
		if err != nil {
			return doc, fmt.Errorf("product %s: %w", ref.ID, err)
		}
		if cat == ref.Category {
			break
		}
		ref.Category = cat
	}
	return productDoc{}, fmt.Errorf("product %s: %w", ref.ID, catalog.ErrNotFound)
}
