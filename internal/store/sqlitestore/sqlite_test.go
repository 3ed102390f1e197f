package sqlitestore

import (
	"context"
	sqldriver "database/sql/driver"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/store/storetest"
	"github.com/shardmart/shardmart/internal/tracing"
)

// each contract family runs on its own fresh database file, and on both drivers we measured.
func openTest(t *testing.T, drv driver) *DB {
	t.Helper()
	db, err := open(context.Background(), filepath.Join(t.TempDir(), "test.db"), drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestContract(t *testing.T) {
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	traced := defaultDriver // what OpenTraced opens: every connection through traced.go's wrapper
	traced.tracer = tr.Tracer()
	for _, c := range []struct {
		name string
		drv  driver
	}{{mattn.name, mattn}, {modernc.name, modernc}, {"traced", traced}} {
		drv := c.drv
		t.Run(c.name, func(t *testing.T) {
			db := openTest(t, drv)
			storetest.Run(t, storetest.WholeStore(db, func(t *testing.T) *DB { return openTest(t, drv) },
				"embedded, the catalog family is the products table itself, not a projector-fed model"))
		})
	}
}

// TestTracedConnForwardsDriverInterfaces: the traced connection offers database/sql every
// optional interface the driver's own connection does, on both drivers.
func TestTracedConnForwardsDriverInterfaces(t *testing.T) {
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	for _, drv := range []driver{mattn, modernc} {
		drv.tracer = tr.Tracer()
		db := openTest(t, drv)
		conn, err := db.r.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = conn.Raw(func(dc any) error {
			tc, ok := dc.(*tracedConn)
			if !ok {
				return fmt.Errorf("%s: connection %T is not the traced wrapper", drv.name, dc)
			}
			for name, has := range map[string]func(any) bool{
				"ConnPrepareContext": is[sqldriver.ConnPrepareContext], "SessionResetter": is[sqldriver.SessionResetter],
				"Validator": is[sqldriver.Validator], "NamedValueChecker": is[sqldriver.NamedValueChecker],
				"ExecerContext": is[sqldriver.ExecerContext], "QueryerContext": is[sqldriver.QueryerContext],
				"ConnBeginTx": is[sqldriver.ConnBeginTx], "Pinger": is[sqldriver.Pinger],
			} {
				if has(tc.Conn) && !has(tc) {
					t.Errorf("%s: the driver's connection is a %s, the traced one is not", drv.name, name)
				}
			}
			return nil
		})
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
