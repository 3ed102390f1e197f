package tracing

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"
)

// Breakdown is where one request type's time went, averaged over its sampled requests.
type Breakdown struct {
	// Request is the root span's name: the route ("PUT /v1/cart/items/{product_id}").
	Request  string        `json:"request"`
	Requests int           `json:"requests"`
	Mean     time.Duration `json:"mean"`
	P50      time.Duration `json:"p50"`
	// InStatements is the mean time per request during which at least one statement or wire
	// command was in flight; Between is the rest (Go code, locks, queues, bcrypt, the network
	// to the client's side of the driver): InStatements + Between = Mean.
	InStatements time.Duration   `json:"in_statements"`
	Between      time.Duration   `json:"between"`
	Statements   []StatementTime `json:"statements"`
	// Waits is the mean time per request in KindWait spans; Sync in the projector's Sync.
	Waits time.Duration `json:"waits"`
	Sync  time.Duration `json:"sync"`
	// Retries per request: driver re-attempts of a statement and extra LWT rounds.
	StatementRetries float64 `json:"statement_retries"`
	LWTRetries       float64 `json:"lwt_retries"`
}

// StatementTime is one statement's share of a request type.
type StatementTime struct {
	Statement string        `json:"statement"`
	Backend   string        `json:"backend"`
	PerReq    float64       `json:"per_request"` // executions per request
	Mean      time.Duration `json:"mean"`        // time per request, all its executions
}

// interval is a span's [start, end).
type interval struct{ from, to time.Time }

// Summarize groups spans by trace, takes each trace's root as the request and its type as the
// root's name, and returns the breakdown per request type (most time in total first). only,
// when set, keeps the roots it accepts (bench: requests of the recorded window).
func Summarize(spans []Span, only func(root Span) bool) []Breakdown {
	byTrace := map[string][]Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	type acc struct {
		b                      Breakdown
		stmts                  map[[2]string]*StatementTime
		durs                   []time.Duration
		total, in, waits, sync time.Duration
		retries, lwt           int
	}
	types := map[string]*acc{}
	for _, trace := range byTrace {
		var root *Span
		for i := range trace {
			if trace[i].ParentID == "" {
				root = &trace[i]
			}
		}
		if root == nil || (only != nil && !only(*root)) {
			continue
		}
		a := types[root.Name]
		if a == nil {
			a = &acc{b: Breakdown{Request: root.Name}, stmts: map[[2]string]*StatementTime{}}
			types[root.Name] = a
		}
		a.b.Requests++
		d := root.Duration()
		a.durs = append(a.durs, d)
		a.total += d
		var busy []interval
		for _, s := range trace {
			switch s.Attrs[string(KeyKind)] {
			case KindStatement:
				k := [2]string{s.Attrs[string(KeyBackend)], s.Name}
				st := a.stmts[k]
				if st == nil {
					st = &StatementTime{Statement: s.Name, Backend: k[0]}
					a.stmts[k] = st
				}
				st.PerReq++
				st.Mean += s.Duration()
				busy = append(busy, interval{s.Start, s.End})
				if s.Attrs[string(KeyAttempt)] != "" && s.Attrs[string(KeyAttempt)] != "0" {
					a.retries++
				}
			case KindWait:
				a.waits += s.Duration()
			case KindSync:
				a.sync += s.Duration()
			}
			a.lwt += s.Events[EventLWTRetry]
		}
		a.in += union(busy, root.Start, root.End)
	}
	out := make([]Breakdown, 0, len(types))
	for _, a := range types {
		n := a.b.Requests
		b := a.b
		b.Mean = a.total / time.Duration(n)
		slices.Sort(a.durs)
		b.P50 = a.durs[(len(a.durs)-1)/2]
		b.InStatements = a.in / time.Duration(n)
		b.Between = b.Mean - b.InStatements
		b.Waits, b.Sync = a.waits/time.Duration(n), a.sync/time.Duration(n)
		b.StatementRetries, b.LWTRetries = float64(a.retries)/float64(n), float64(a.lwt)/float64(n)
		for _, st := range a.stmts {
			st.PerReq /= float64(n)
			st.Mean /= time.Duration(n)
			b.Statements = append(b.Statements, *st)
		}
		slices.SortFunc(b.Statements, func(x, y StatementTime) int {
			return cmp.Or(cmp.Compare(y.Mean, x.Mean), cmp.Compare(x.Statement, y.Statement))
		})
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y Breakdown) int {
		return cmp.Or(cmp.Compare(y.Mean*time.Duration(y.Requests), x.Mean*time.Duration(x.Requests)), cmp.Compare(x.Request, y.Request))
	})
	return out
}

// union is the time covered by at least one of iv, clipped to [from, to]: concurrent
// statements (a fan-out) count once.
func union(iv []interval, from, to time.Time) time.Duration {
	slices.SortFunc(iv, func(x, y interval) int { return x.from.Compare(y.from) })
	var total time.Duration
	var cur interval
	open := false
	for _, x := range iv {
		if x.from.Before(from) {
			x.from = from
		}
		if x.to.After(to) {
			x.to = to
		}
		if !x.to.After(x.from) {
			continue
		}
		if open && !x.from.After(cur.to) {
			if x.to.After(cur.to) {
				cur.to = x.to
			}
			continue
		}
		if open {
			total += cur.to.Sub(cur.from)
		}
		cur, open = x, true
	}
	if open {
		total += cur.to.Sub(cur.from)
	}
	return total
}

// Write prints the breakdowns as text.
func Write(w io.Writer, bs []Breakdown) error {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	pct := func(d, of time.Duration) float64 {
		if of == 0 {
			return 0
		}
		return 100 * float64(d) / float64(of)
	}
	for _, b := range bs {
		if _, err := fmt.Fprintf(w, "%s: %d sampled, mean %s, p50 %s\n", b.Request, b.Requests, ms(b.Mean), ms(b.P50)); err != nil {
			return err
		}
		fmt.Fprintf(w, "  in statements    %10s  %5.1f%%\n", ms(b.InStatements), pct(b.InStatements, b.Mean))
		for _, st := range b.Statements {
			fmt.Fprintf(w, "    %-28s %10s  %4.1f per request  (%s)\n", st.Statement, ms(st.Mean), st.PerReq, st.Backend)
		}
		fmt.Fprintf(w, "  between statements %8s  %5.1f%%\n", ms(b.Between), pct(b.Between, b.Mean))
		fmt.Fprintf(w, "  projector sync %s, waits %s, retries per request: %.2f statement, %.2f LWT\n",
			ms(b.Sync), ms(b.Waits), b.StatementRetries, b.LWTRetries)
	}
	return nil
}
