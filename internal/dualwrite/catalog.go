package dualwrite

import (
	"context"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/projection"
)

// catalogSink feeds Cassandra's catalog read model from the projector while the catalog is
// being migrated or cut over; before, it drops changes. The projector's checkpoint makes it
// durable: a failed write is retried, never skipped. The read model orders a product's writes
// by when they are made (the projector's clock), so the write runs after the phase is released (a hung Cassandra holds up no phase
// change), bounded by copyTimeout like every copy.
type catalogSink struct {
	neu projection.CatalogSink
	ph  *familyPhase
}

func (s *catalogSink) UpsertProduct(ctx context.Context, p catalog.Product) error {
	if s.ph.get() == migrate.PhaseNone {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout)
	defer cancel()
	return s.neu.UpsertProduct(ctx, p)
}
