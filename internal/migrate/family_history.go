package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// historyFamily: an order's history entry, keyed by the order id, kept whole and written
// through the shop's own repository (cassandrastore History.UpsertEntry), which writes it at
// its UpdatedAt: every status change moves that, so the dual write's newer entry always
// beats a backfilled older one.
type historyFamily struct{ oldRows[history.Entry] }

var historyRows = oldRows[history.Entry]{
	table: "order_history", key: "order_id", sel: sqlitestore.HistorySelect,
	scan:   func(rs *sql.Rows) (history.Entry, error) { return sqlitestore.ScanHistoryEntry(rs) },
	coll:   mongoFamily{coll: mongostore.HistoryCollection, key: "_id"},
	decode: current(mongostore.DecodeHistoryEntry),
	row:    func(e *history.Entry) Row { return Row{Key: e.OrderID, Entry: e} },
	of:     func(r Row) *history.Entry { return r.Entry },
}

// stamp: the later of PlacedAt and UpdatedAt, the write time UpsertEntry gives the entry.
// The MongoDB source once took UpdatedAt alone, which differs for an entry whose UpdatedAt is
// unset or earlier than its PlacedAt; the repository's rule is the one Cassandra holds.
func (historyFamily) stamp(r *Row, _ time.Duration) {
	r.Modified = latest(r.Entry.PlacedAt, r.Entry.UpdatedAt)
}

func (historyFamily) write(ctx context.Context, t *Target, r Row, _ int) error {
	return cassandrastore.NewHistory(t.s).UpsertEntry(ctx, *r.Entry)
}

func (historyFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	return cassandrastore.HistoryScan(ctx, t.s, func(e history.Entry) error { return fn(historyRows.row(&e)) })
}

func (historyFamily) replace(ctx context.Context, t *Target, _ string, rows []Row, _, now time.Time) error {
	_, err := t.Write(ctx, History, rows, now)
	return err
}

func (historyFamily) canonical(r Row, c *canon) {
	e := r.Entry
	c.field("history", e.OrderID, e.UserID, c.t(e.PlacedAt), c.t(e.UpdatedAt), string(e.Status), e.Zone, fmt.Sprint(int64(e.Total)))
	for _, it := range e.Items { // the order's lines keep their order
		c.field(fmt.Sprintf("%s|%s|%s|%d|%d", it.ProductID, it.Category, it.Name, it.Quantity, int64(it.UnitPrice)))
	}
}
