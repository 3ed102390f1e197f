package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/store"
)

// A refusal that a transaction decided and aborted on (an illegal status move, too little
// stock) is passed on only once a linearizable read confirms what it was based on. An aborted
// transaction's reads carry no majority guarantee: a primary cut from its peers, not yet
// stepped down, reads its own writes that no majority holds, and the failover rolls them
// back. The robustness tests saw "paid" refused because an unacknowledged "paid" had been
// applied there; the order was "created" again after the heal. A linearizable read ends with
// a majority write after everything its member had applied; the driver may retry it on the
// new primary, so the decision is taken again on what it returns. Not confirmed, the caller
// gets ErrUnavailable (the outcome is open; a retry decides), never a refusal.

// linearizable is a collection whose reads are linearizable (one document each).
func (s *Store) linearizable(name string) *mongo.Collection {
	return s.db.Collection(name, options.Collection().
		SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Linearizable()))
}

// confirmIllegal confirms an illegal status move of order id.
func (s *Store) confirmIllegal(ctx context.Context, id string, to order.Status, at time.Time, refusal error) error {
	o, err := s.orderByID(ctx, s.linearizable(collClaims), s.linearizable(collOrders), id)
	if err != nil {
		return unconfirmed(refusal, err)
	}
	if o.TransitionTo(to, at) == nil {
		return unconfirmed(refusal, fmt.Errorf("the committed status %s allows it", o.Status))
	}
	return refusal
}

// confirmShort confirms that the stock is too low for the order.
func (s *Store) confirmShort(ctx context.Context, short *catalog.InsufficientStockError, refusal error) error {
	doc, err := s.getProduct(ctx, s.linearizable(collClaims), s.linearizable(collProducts), short.ProductID)
	if err != nil {
		return unconfirmed(refusal, err)
	}
	if doc.product().Stock[short.Zone] >= short.Requested {
		return unconfirmed(refusal, fmt.Errorf("the committed stock %d covers it", doc.product().Stock[short.Zone]))
	}
	return refusal
}

// unconfirmed answers a refusal the confirming read did not uphold. A read that finds the
// product or order gone is itself a linearizable answer: that sentinel alone is returned, not
// ErrUnavailable too (callers test not-found first and would refuse on an open outcome).
// Either way the transaction aborted, so the error says nothing committed.
func unconfirmed(refusal, err error) error {
	for _, gone := range []error{catalog.ErrNotFound, order.ErrNotFound} {
		if errors.Is(err, gone) {
			return fmt.Errorf("mongo: %v: %w", refusal, gone)
		}
	}
	return &store.UnavailableError{Reason: "a refusal not confirmed by a majority (the primary may be cut off)",
		RetryAfter: time.Second, Err: fmt.Errorf("mongo: %v: %w", refusal, err), Aborted: true}
}
