package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// historyFamily: an order's history entry, keyed by the order id, kept whole and written
// through the shop's own repository (cassandrastore History.UpsertEntry), which writes it at
// its UpdatedAt: every status change moves that, so the dual write's newer entry always
// beats a backfilled older one.
type historyFamily struct{}

func (historyFamily) sqlite() (string, string) { return "order_history", "order_id" }

func (historyFamily) readSQLite(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	return readSQLiteRows(ctx, tx, sqlitestore.HistorySelect, "order_id", r, func(rs *sql.Rows) (Row, error) {
		e, err := sqlitestore.ScanHistoryEntry(rs)
		return Row{Key: e.OrderID, Entry: &e}, err
	})
}

func (historyFamily) mongo() mongoFamily {
	return mongoFamily{coll: mongostore.HistoryCollection, key: "_id"}
}

func (historyFamily) decodeMongo(raw bson.Raw) (Row, bool, error) {
	e, err := mongostore.DecodeHistoryEntry(raw)
	return Row{Key: e.OrderID, Entry: &e}, false, err
}

// stamp: the later of PlacedAt and UpdatedAt, the write time UpsertEntry gives the entry.
// The MongoDB source once took UpdatedAt alone, which differs for an entry whose UpdatedAt is
// unset or earlier than its PlacedAt; the repository's rule is the one Cassandra holds.
func (historyFamily) stamp(r *Row, _ time.Duration) {
	r.Modified = latest(r.Entry.PlacedAt, r.Entry.UpdatedAt)
}

func (historyFamily) holds(r Row) bool { return r.Entry != nil }

func (historyFamily) write(ctx context.Context, t *Target, r Row, _ int) error {
	return cassandrastore.NewHistory(t.s).UpsertEntry(ctx, *r.Entry)
}

func (historyFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	return cassandrastore.HistoryScan(ctx, t.s, func(e history.Entry) error { return fn(Row{Key: e.OrderID, Entry: &e}) })
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
