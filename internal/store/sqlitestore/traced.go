package sqlitestore

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/tracing"
)

// database/sql has no statement hooks, so a traced store wraps the driver's connections: each
// ExecContext, QueryContext (until its rows close), BeginTx and Commit of a sampled request
// becomes a statement span. The untraced store never goes through this file.

func (d driver) open(path string, readOnly bool) (*sql.DB, error) {
	if d.tracer == nil {
		return sql.Open(d.name, d.dsn(path, readOnly))
	}
	probe, err := sql.Open(d.name, "")
	if err != nil {
		return nil, err
	}
	base := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, err
	}
	return sql.OpenDB(tracedConnector{base: base, dsn: d.dsn(path, readOnly), tr: d.tracer}), nil
}

type tracedConnector struct {
	base sqldriver.Driver
	dsn  string
	tr   trace.Tracer
}

func (c tracedConnector) Connect(context.Context) (sqldriver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	// The connection must offer the context forms: the wrapper relies on them.
	for _, ok := range []bool{is[sqldriver.ExecerContext](conn), is[sqldriver.QueryerContext](conn), is[sqldriver.ConnBeginTx](conn)} {
		if !ok {
			_ = conn.Close()
			return nil, fmt.Errorf("sqlite: driver connection %T lacks the context interfaces tracing wraps", conn)
		}
	}
	return &tracedConn{Conn: conn, tr: c.tr}, nil
}

func (c tracedConnector) Driver() sqldriver.Driver { return c.base }

func is[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

type tracedConn struct {
	sqldriver.Conn
	tr trace.Tracer
}

func (c *tracedConn) statement(ctx context.Context, name string, start time.Time, err error) {
	if errors.Is(err, sqldriver.ErrSkip) {
		return
	}
	tracing.Statement(ctx, c.tr, "sqlite", name, start, time.Now(), err)
}

// sampled reports whether ctx is a sampled request's: the others go straight to the driver,
// so a low sampling ratio costs the unsampled requests no wrapper.
func sampled(ctx context.Context) bool { return trace.SpanFromContext(ctx).SpanContext().IsSampled() }

func (c *tracedConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	if !sampled(ctx) {
		return c.Conn.(sqldriver.ExecerContext).ExecContext(ctx, query, args)
	}
	start := time.Now()
	res, err := c.Conn.(sqldriver.ExecerContext).ExecContext(ctx, query, args)
	c.statement(ctx, tracing.StatementName(query), start, err)
	return res, err
}

func (c *tracedConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	if !sampled(ctx) {
		return c.Conn.(sqldriver.QueryerContext).QueryContext(ctx, query, args)
	}
	start := time.Now()
	rows, err := c.Conn.(sqldriver.QueryerContext).QueryContext(ctx, query, args)
	if err != nil {
		c.statement(ctx, tracing.StatementName(query), start, err)
		return nil, err
	}
	return &tracedRows{Rows: rows, end: func(err error) { c.statement(ctx, tracing.StatementName(query), start, err) }}, nil
}

func (c *tracedConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	if !sampled(ctx) {
		return c.Conn.(sqldriver.ConnBeginTx).BeginTx(ctx, opts)
	}
	// BEGIN IMMEDIATE takes the write lock: its time is the wait for other writers.
	start := time.Now()
	tx, err := c.Conn.(sqldriver.ConnBeginTx).BeginTx(ctx, opts)
	c.statement(ctx, "begin", start, err)
	if err != nil {
		return nil, err
	}
	return tracedTx{Tx: tx, end: func(name string, start time.Time, err error) { c.statement(ctx, name, start, err) }}, nil
}

func (c *tracedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(sqldriver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// The driver's optional interfaces, forwarded: database/sql looks for them on the connection
// it holds, and without them it would prepare through the context-less Prepare, never ask the
// driver to reset a pooled session, nor learn that a connection went bad.

func (c *tracedConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	if p, ok := c.Conn.(sqldriver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *tracedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(sqldriver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *tracedConn) IsValid() bool {
	if v, ok := c.Conn.(sqldriver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *tracedConn) CheckNamedValue(nv *sqldriver.NamedValue) error {
	if n, ok := c.Conn.(sqldriver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return sqldriver.ErrSkip // database/sql's own conversion, as without a checker
}

type tracedTx struct {
	sqldriver.Tx
	end func(name string, start time.Time, err error)
}

func (t tracedTx) Commit() error {
	start := time.Now()
	err := t.Tx.Commit()
	t.end("commit", start, err)
	return err
}

func (t tracedTx) Rollback() error {
	start := time.Now()
	err := t.Tx.Rollback()
	t.end("rollback", start, err)
	return err
}

// tracedRows ends the query's span when its rows are closed: SQLite steps through the rows
// as they are read, so that is when the statement's work is done.
type tracedRows struct {
	sqldriver.Rows
	end  func(err error)
	err  error
	done bool
}

func (r *tracedRows) Next(dest []sqldriver.Value) error {
	err := r.Rows.Next(dest)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return err
}

func (r *tracedRows) Close() error {
	err := r.Rows.Close()
	if !r.done {
		r.done = true
		r.end(errors.Join(r.err, err))
	}
	return err
}
