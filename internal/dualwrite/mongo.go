package dualwrite

import (
	"context"
	"fmt"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// WrapMongo is Wrap for a shop moving sessions, carts, history and events from the embedded
// store to MongoDB (`migrate --to mongo`): the phases and heartbeats live in the MongoDB
// database at o.MongoURI/o.MongoDatabase, sessions, carts and events are copied by reading the
// changed keys back (migrate.MongoMirror, which applies the ordering rule of internal/migrate),
// history by UpsertEntry, whose updated_at condition is the same rule. After cutover the
// family is served from MongoDB and the embedded store is kept updated, as on the Cassandra
// path (sessions, events and history by the same operation, carts by copying the owner's carts
// back), so a rollback finds every change there.
func WrapMongo(ctx context.Context, s *placement.Stores, cfg placement.Config, o placement.Options) (*Layer, error) {
	st, err := mongostore.Open(ctx, mongostore.Options{URI: o.MongoURI, Database: o.MongoDatabase})
	if err != nil {
		return nil, fmt.Errorf("dual writes: open mongo: %w", err)
	}
	s.OnClose(st.Close)
	target := migrate.NewMongoTarget(st)
	target.Retention = o.EventRetention
	m := &Layer{phases: map[family.Name]*familyPhase{}, state: target, owners: target, onError: o.MigrationError}
	var mirror *migrate.MongoMirror
	for _, f := range migrate.MongoFamilies {
		if cfg[f] != family.SQLite {
			continue
		}
		if mirror == nil {
			src, closeSrc, err := migrate.OpenOld(ctx, migrate.Stores{From: migrate.FromSQLite, SQLitePath: o.SQLitePath, EventRetention: o.EventRetention})
			if err != nil {
				return nil, fmt.Errorf("dual writes: open the embedded store to copy from: %w", err)
			}
			s.OnClose(func() error { closeSrc(); return nil })
			mirror = &migrate.MongoMirror{Src: src, Dst: target}
			m.mirror, m.carts = mirror, mirror
		}
		ph := &familyPhase{}
		m.phases[f] = ph
		mongoWrappers[f](s, st, m, ph)
	}
	if err := m.applyFirst(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// mongoWrappers put each family that moves to MongoDB with dual writes under the layer.
var mongoWrappers = wrappersFor[*mongostore.Store](migrate.MongoFamilies, nil)
