package readrouting

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// DefaultOplogInterval is how often the Monitor reads each set's oplog window: the window
// spans hours on a production oplog, so a reading every 15 s is plenty, and each costs two
// single-document reads at the ends of local.oplog.rs.
const DefaultOplogInterval = 15 * time.Second

// OplogWindow is the span of a replica set's oplog on its primary, computed as MongoDB's
// db.getReplicationInfo() computes timeDiff: the ts (whole seconds) of the last entry in
// natural order minus that of the first. A member that falls further behind than the window
// can no longer catch up from the oplog: the primary has truncated the entries it needs next,
// and only a full resync brings it back.
type OplogWindow struct {
	First, Last time.Time
	ReadAt      time.Time // when it was read (the application's clock)
}

// Span is Last − First.
func (w OplogWindow) Span() time.Duration { return w.Last.Sub(w.First) }

// OplogReader is a StatusSource that can also read its set's oplog window on the primary.
type OplogReader interface {
	OplogWindow(ctx context.Context) (OplogWindow, error)
}

// OplogWindow reads the set's oplog window on its primary.
func (s DriverSource) OplogWindow(ctx context.Context) (OplogWindow, error) {
	return ReadOplogWindow(ctx, s.Client)
}

// ReadOplogWindow reads the first and last entries of local.oplog.rs on the primary of the set
// client is connected to. Each is one document at an end of the capped collection in natural
// order (a projection of ts alone), so the read costs the same whatever the oplog's size.
func ReadOplogWindow(ctx context.Context, client *mongo.Client) (OplogWindow, error) {
	oplog := client.Database("local", options.Database().SetReadPreference(readpref.Primary())).Collection("oplog.rs")
	first, err := oplogEnd(ctx, oplog, 1)
	if err != nil {
		return OplogWindow{}, fmt.Errorf("oplog window: first entry: %w", err)
	}
	last, err := oplogEnd(ctx, oplog, -1)
	if err != nil {
		return OplogWindow{}, fmt.Errorf("oplog window: last entry: %w", err)
	}
	return OplogWindow{First: first, Last: last, ReadAt: time.Now()}, nil
}

func oplogEnd(ctx context.Context, oplog *mongo.Collection, natural int) (time.Time, error) {
	var e struct {
		TS bson.Timestamp `bson:"ts"`
	}
	err := oplog.FindOne(ctx, bson.D{}, options.FindOne().
		SetSort(bson.D{{Key: "$natural", Value: natural}}).
		SetProjection(bson.D{{Key: "ts", Value: 1}, {Key: "_id", Value: 0}})).Decode(&e)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(int64(e.TS.T), 0), nil
}

// OplogWindows returns the latest oplog window of every set whose last reading succeeded, by
// replica set name (a set whose reading fails is left out until it succeeds again).
func (m *Monitor) OplogWindows() map[string]OplogWindow {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]OplogWindow, len(m.oplog))
	for name, w := range m.oplog {
		out[m.setName(name)] = w
	}
	return out
}

// MeasureOplogs reads the oplog window of every source that is an OplogReader, in parallel,
// each bounded by ctx, and stores the results; it returns the failures by source name.
func (m *Monitor) MeasureOplogs(ctx context.Context) map[string]error {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		got  = map[string]OplogWindow{}
		errs = map[string]error{}
	)
	for name, src := range m.sources {
		r, ok := src.(OplogReader)
		if !ok {
			continue
		}
		wg.Go(func() {
			w, err := r.OplogWindow(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[name] = err
				return
			}
			got[name] = w
		})
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.oplog == nil {
		m.oplog = map[string]OplogWindow{}
	}
	maps.Copy(m.oplog, got)
	for name := range errs {
		delete(m.oplog, name)
	}
	return errs
}

// setName is the replica set name the last status of source name gave (the source name
// itself before one, or when the status had none). Callers hold m.mu for reading.
func (m *Monitor) setName(name string) string {
	if s, ok := m.sets[name]; ok && s != "" {
		return s
	}
	return name
}

// oplogs reads the oplog windows every OplogInterval until ctx is done, each round bounded by
// the interval; a failing set is logged once per outage. clusterMonitor grants the read (find
// on the local database).
func (m *Monitor) oplogs(ctx context.Context) {
	every := m.OplogInterval
	if every <= 0 {
		every = DefaultOplogInterval
	}
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := map[string]bool{}
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		errs := m.MeasureOplogs(rctx)
		cancel()
		for name := range m.sources {
			switch err := errs[name]; {
			case err != nil && ctx.Err() == nil && !failing[name]:
				failing[name] = true
				log.Warn("readrouting: oplog window unreadable", "set", name, "err", err)
			case err == nil && failing[name]:
				delete(failing, name)
				log.Info("readrouting: oplog window readable again", "set", name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
