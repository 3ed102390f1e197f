package migrate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
	"github.com/shardmart/shardmart/internal/testkit/dsbulk"
)

// BenchmarkBackfillVsDSBulk loads the same rows of every family into one one-node Cassandra on
// launcher.BenchTestAddr with Backfill (4 and 8 workers) and with DSBulk (CSV exported from
// the same rows, one file per table, writetime and TTL mapped per row where our write path
// sets them, QUORUM), each into a fresh keyspace, rounds times in rotating order, and reports
// rows/s (live source rows: sessions, carts, history entries, events, products). Not part of
// make test:
//
//	go test ./internal/migrate -run '^$' -bench BenchmarkBackfillVsDSBulk -benchtime 1x -timeout 60m
//
// DSBulk comes from $SHARDMART_DSBULK (a dsbulk executable) or else dsbulk.Ensure
// (Maven Central); without either the benchmark fails. Sizes: $SHARDMART_BENCH_SESSIONS
// (50000), $SHARDMART_BENCH_CARTS (10000, 2-4 lines each), $SHARDMART_BENCH_HISTORY (20000
// entries of $SHARDMART_BENCH_HISTORY/10 users), $SHARDMART_BENCH_EVENTS (50000, 1 in 1000
// past the retention), $SHARDMART_BENCH_PRODUCTS (10000, stock in 3 zones, 1 in 50
// inactive), $SHARDMART_BENCH_ROUNDS (3).
func BenchmarkBackfillVsDSBulk(b *testing.B) {
	ctx := context.Background()
	dsbulk := dsbulkRunner(b)
	sz := benchSizes{sessions: envInt(b, "SHARDMART_BENCH_SESSIONS", 50000), carts: envInt(b, "SHARDMART_BENCH_CARTS", 10000),
		history: envInt(b, "SHARDMART_BENCH_HISTORY", 20000), events: envInt(b, "SHARDMART_BENCH_EVENTS", 50000),
		products: envInt(b, "SHARDMART_BENCH_PRODUCTS", 10000)}
	rounds := envInt(b, "SHARDMART_BENCH_ROUNDS", 3)
	families := []Family{Sessions, Carts, History, Events, Catalog}
	c := launcher.ForTest(b, launcher.Options{Nodes: 1, BaseAddr: launcher.BenchTestAddr, HeapMB: 1024})
	hosts := c.Hosts()
	dir := b.TempDir()
	b.Logf("before seeding: %s", loadavg())
	path := benchSeed(b, dir, sz)
	src, err := OpenSource(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	csvs := map[Family]map[string]string{}
	live := map[Family]int{}
	for _, f := range families {
		csvs[f], live[f], err = exportCSV(ctx, src, f, dir, time.Now())
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("source: %+v; live rows %v; %s", sz, live, loadavg())

	type tool struct {
		name string
		// run returns the wall time and, for DSBulk, its own operation time (JVM start excluded).
		run func(ks string, s *gocql.Session, f Family) (wall, net time.Duration, err error)
	}
	ours := func(w int) tool {
		return tool{fmt.Sprintf("backfill-w%d", w), func(_ string, s *gocql.Session, f Family) (time.Duration, time.Duration, error) {
			st, err := Backfill(ctx, src, NewTarget(s), f, Options{Workers: w})
			if err == nil && st.Rows != int64(live[f]) {
				err = fmt.Errorf("backfill copied %d rows, want %d", st.Rows, live[f])
			}
			return st.Elapsed, 0, err
		}}
	}
	tools := []tool{ours(4), ours(8), {"dsbulk", func(ks string, _ *gocql.Session, f Family) (time.Duration, time.Duration, error) {
		start := time.Now()
		var net time.Duration
		for table, file := range csvs[f] {
			d, err := dsbulkLoad(ctx, dsbulk, hosts[0], ks, table, file, dir)
			if err != nil {
				return 0, 0, err
			}
			net += d
		}
		return time.Since(start), net, nil
	}}}
	rates := map[string][]float64{}
	for r := range rounds {
		for _, f := range families {
			for i := range tools {
				t := tools[(i+r)%len(tools)]
				ks := fmt.Sprintf("bench_%s_%d", strings.ReplaceAll(t.name, "-", "_"), r)
				s, drop := benchKeyspace(b, hosts, ks)
				el, net, err := t.run(ks, s, f)
				if err == nil && r == 0 { // same rows, write times and TTLs as the source, checked once per tool (not timed)
					if _, err = Verify(ctx, src, NewTarget(s), f, Options{}); err == nil {
						err = checkWriteMeta(ctx, src, s, f)
					}
				}
				drop()
				if err != nil {
					b.Fatalf("round %d %s %s: %v", r+1, f, t.name, err)
				}
				rate := float64(live[f]) / el.Seconds()
				key := string(f) + "/" + t.name
				rates[key] = append(rates[key], rate)
				b.Logf("round %d %-8s %-12s %7d rows in %6.2fs = %8.0f rows/s", r+1, f, t.name, live[f], el.Seconds(), rate)
				if net > 0 {
					rates[key+"-net"] = append(rates[key+"-net"], float64(live[f])/net.Seconds())
					b.Logf("round %d %-8s %-12s %7d rows in %6.2fs = %8.0f rows/s (DSBulk's own operation time)", r+1, f, t.name+"-net", live[f], net.Seconds(), float64(live[f])/net.Seconds())
				}
			}
		}
	}
	keys := make([]string, 0, len(rates))
	for k := range rates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.ReportMetric(median(rates[k]), k+"-rows/s")
	}
	for _, f := range families {
		d := median(rates[string(f)+"/dsbulk"])
		dn := median(rates[string(f)+"/dsbulk-net"])
		w4, w8 := median(rates[string(f)+"/backfill-w4"]), median(rates[string(f)+"/backfill-w8"])
		b.Logf("%s median rows/s: backfill-w4 %.0f (%.2fx dsbulk wall, %.2fx net), backfill-w8 %.0f (%.2fx, %.2fx), dsbulk wall %.0f, net %.0f",
			f, w4, w4/d, w4/dn, w8, w8/d, w8/dn, d, dn)
	}
	b.Logf("after: %s", loadavg())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return "loadavg " + strings.TrimSpace(string(b))
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// dsbulkRunner returns the command prefix that runs DSBulk, failing the benchmark when there is none.
func dsbulkRunner(b *testing.B) func(ctx context.Context, args ...string) *exec.Cmd {
	if p := os.Getenv("SHARDMART_DSBULK"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			b.Fatalf("SHARDMART_DSBULK=%s: %v", p, err)
		}
		return func(ctx context.Context, args ...string) *exec.Cmd { return exec.CommandContext(ctx, p, args...) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lib, err := dsbulk.Ensure(ctx, launcher.DefaultCacheDir())
	if err != nil {
		b.Fatalf("DSBulk is needed for this benchmark: set SHARDMART_DSBULK to a dsbulk executable, or let it be fetched from Maven Central: %v", err)
	}
	out, err := dsbulk.Command(ctx, lib, "--version").CombinedOutput()
	if err != nil {
		b.Fatalf("dsbulk --version: %v\n%s", err, out)
	}
	b.Logf("%s (jars in %s)", strings.TrimSpace(string(out)), lib)
	return func(ctx context.Context, args ...string) *exec.Cmd { return dsbulk.Command(ctx, lib, args...) }
}

var dsbulkSummary = regexp.MustCompile(`(?m)^\s*([\d,]+) \|\s+([\d,]+) \|\s+([\d,]+) \|`)

// dsbulkLoad loads file into ks.table at QUORUM; the CSV header names the columns, and the
// write_ts and ttl_s fields become each row's USING TIMESTAMP and TTL.
// It returns DSBulk's own operation time: records over the rows/s of its summary.
func dsbulkLoad(ctx context.Context, run func(context.Context, ...string) *exec.Cmd, host, ks, table, file, dir string) (time.Duration, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, fmt.Errorf("dsbulk: %w", err)
	}
	header, err := csv.NewReader(f).Read()
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("dsbulk: %s header: %w", file, err)
	}
	var m []string
	for _, h := range header {
		switch h {
		case "write_ts":
			m = append(m, "write_ts=writetime(*)")
		case "ttl_s":
			m = append(m, "ttl_s=ttl(*)")
		default:
			m = append(m, h+"="+h)
		}
	}
	cmd := run(ctx, "load", "-h", host, "-port", strconv.Itoa(launcher.CQLPort), "-k", ks, "-t", table, "-url", file,
		"-header", "true", "-m", strings.Join(m, ","), "-cl", "QUORUM", "-logDir", filepath.Join(dir, "dsbulk-logs"),
		"-escape", `"\""`, "-maxErrors", "0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "dsbulk-logs", "*", "*errors.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			out = append(out, b[:min(len(b), 3000)]...)
		}
		return 0, fmt.Errorf("dsbulk load %s.%s: %w\n%s", ks, table, err, out)
	}
	sm := dsbulkSummary.FindSubmatch(out)
	if sm == nil {
		return 0, fmt.Errorf("dsbulk load %s.%s: no summary in its output\n%s", ks, table, out)
	}
	num := func(b []byte) float64 {
		n, _ := strconv.ParseFloat(strings.ReplaceAll(string(b), ",", ""), 64)
		return n
	}
	if num(sm[2]) != 0 || num(sm[3]) == 0 {
		return 0, fmt.Errorf("dsbulk load %s.%s: %s failed rows\n%s", ks, table, sm[2], out)
	}
	return time.Duration(num(sm[1]) / num(sm[3]) * float64(time.Second)), nil
}

// checkWriteMeta checks one live row's write metadata as Backfill writes it: sessions and
// carts the source's modification time and a TTL iff the row expires; history entries and
// catalog search rows the write time of the entry's or product's UpdatedAt (ms); events a TTL.
// For history it also counts the bucket index rows: one per (user, month).
func checkWriteMeta(ctx context.Context, src *Source, s *gocql.Session, f Family) error {
	rows, err := src.Read(ctx, f, Range{})
	if err != nil {
		return err
	}
	if f == History {
		buckets := map[string]bool{}
		for _, r := range rows {
			buckets[fmt.Sprint(r.Entry.UserID, r.Entry.PlacedAt.UTC().Format("200601"))] = true
		}
		var n int
		if err := s.Query(`SELECT COUNT(*) FROM order_history_buckets`).WithContext(ctx).Consistency(gocql.Quorum).Scan(&n); err != nil {
			return fmt.Errorf("count order_history_buckets: %w", err)
		}
		if n != len(buckets) {
			return fmt.Errorf("order_history_buckets has %d rows, want %d", n, len(buckets))
		}
	}
	for _, r := range rows {
		if ttlLeft(r.Expires, time.Now()) < 0 || r.Product != nil && r.Product.Inactive {
			continue
		}
		var wt int64
		var ttl int
		want := r.Modified.UnixMicro()
		var q *gocql.Query
		switch f {
		case Sessions:
			q = s.Query(`SELECT writetime(status), ttl(status) FROM sessions WHERE session_id = ?`, r.Key)
		case Carts:
			id, err := TimeUUID(r.Key)
			if err != nil {
				return err
			}
			table, key, owner := cartTable(r.Cart.Owner)
			q = s.Query(fmt.Sprintf(`SELECT writetime(status), ttl(status) FROM %s WHERE %s = ? AND cart_id = ? AND product_id = ''`, table, key), owner, id)
		case History:
			e := r.Entry
			want = r.Modified.Truncate(time.Millisecond).UnixMicro()
			q = s.Query(`SELECT writetime(status), ttl(status) FROM order_history WHERE user_id = ? AND bucket = ? AND placed_at = ? AND order_id = ?`,
				e.UserID, e.PlacedAt.UTC().Year()*100+int(e.PlacedAt.UTC().Month()), e.PlacedAt, e.OrderID)
		case Events:
			e := r.Event
			q = s.Query(`SELECT writetime(type), ttl(type) FROM user_events WHERE actor = ? AND event_date = ? AND at = ? AND event_id = ?`,
				e.Actor, event.Day(e.At), e.At, e.ID)
		case Catalog:
			p := r.Product
			want = cassandrastore.BackfillWriteTime(*p)
			q = s.Query(`SELECT writetime(name), ttl(name) FROM products_by_category WHERE category = ? AND bucket = ? AND price = ? AND product_id = ?`,
				p.Category, cassandrastore.CatalogBucket(p.ID), int64(p.Price), p.ID)
		}
		if err := q.WithContext(ctx).Consistency(gocql.Quorum).Scan(&wt, &ttl); err != nil {
			return fmt.Errorf("write time of %s %s: %w", f, r.Key, err)
		}
		if f == Events { // written at the server's time; DSBulk's TTL was computed at export
			if d := ttl - ttlLeft(r.Expires, time.Now()); d > 3600 || d < -3600 {
				return fmt.Errorf("event %s: ttl %d, want about %d", r.Key, ttl, ttlLeft(r.Expires, time.Now()))
			}
			return nil
		}
		if wt != want || (ttl == 0) != r.Expires.IsZero() {
			return fmt.Errorf("%s %s: writetime %d ttl %d, want %d and a TTL iff it expires (%v)", f, r.Key, wt, ttl, want, r.Expires)
		}
		return nil
	}
	return fmt.Errorf("no live %s row", f)
}

func benchKeyspace(b *testing.B, hosts []string, ks string) (*gocql.Session, func()) {
	ctx := context.Background()
	if _, err := cassandrastore.ApplySchema(ctx, hosts, cassandrastore.SchemaOptions{Keyspace: ks, RF: 1}); err != nil {
		b.Fatalf("apply schema %s: %v", ks, err)
	}
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: hosts, Keyspace: ks})
	if err != nil {
		b.Fatalf("open %s: %v", ks, err)
	}
	return st.Session(), func() {
		_ = st.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
		st.Close()
	}
}

type benchSizes struct{ sessions, carts, history, events, products int }

// benchSeed writes, through the embedded store's repositories, sessions (1 in 20 expired),
// carts of 2-4 lines (odd ones guest carts), history entries of 1-3 lines (10 per user, over
// 6 months), events (1 in 1000 past the retention, the rest within 80 days) and products
// (stock in 3 zones, 1 in 50 inactive; one transaction per 1000).
func benchSeed(b *testing.B, dir string, sz benchSizes) string {
	ctx := context.Background()
	path := filepath.Join(dir, "shop.db")
	db, err := sqlitestore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	for i := range sz.sessions {
		id := sha256.Sum256([]byte(fmt.Sprint("s", i)))
		s := session.Session{ID: hex.EncodeToString(id[:]), CreatedAt: now.Add(-2 * time.Hour), LastActive: now.Add(-time.Duration(i%3600) * time.Second),
			ExpiresAt: now.Add(time.Duration(1+i%120) * time.Hour), IP: fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256),
			UserAgent: "Mozilla/5.0 (bench)", Status: session.StatusActive, Data: map[string]string{"locale": "en", "n": strconv.Itoa(i)}}
		if i%20 == 0 {
			s.ExpiresAt = now.Add(-time.Hour)
		}
		if i%3 == 0 {
			s.UserID = fmt.Sprint("user", i)
		}
		if err := db.Sessions().CreateSession(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	for i := range sz.carts {
		owner, exp := cart.User(fmt.Sprint("user", i)), time.Time{}
		if i%2 == 1 {
			owner, exp = cart.Guest(fmt.Sprint("sess", i)), now.Add(48*time.Hour)
		}
		for j := range 2 + i%3 {
			it := cart.Item{ProductID: fmt.Sprint("p", j), Category: "books", Quantity: int64(j + 1), AddedAt: now.Add(-time.Duration(j) * time.Minute)}
			if _, err := db.Carts().PutItem(ctx, owner, it, exp, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	now = now.Truncate(time.Millisecond)
	users := max(1, sz.history/10)
	for i := range sz.history {
		id, _ := uuid.NewV7()
		placed := now.Add(-time.Duration(i%180)*24*time.Hour - time.Duration(i%997)*time.Second)
		e := history.Entry{UserID: fmt.Sprint("user", i%users), OrderID: id.String(), PlacedAt: placed, UpdatedAt: placed.Add(time.Duration(1+i%50) * time.Minute),
			Status: []order.Status{order.Paid, order.Shipped, order.Cancelled}[i%3], Zone: []string{"eu-west", "us-east", "ap-south"}[i%3], Total: money.Amount(1000 + i%500)}
		for j := range 1 + i%3 {
			e.Items = append(e.Items, order.Item{ProductID: fmt.Sprintf("p-%05d", (i+j)%1000), Category: "books", Name: fmt.Sprint("Book ", j),
				Quantity: int64(1 + j), UnitPrice: money.Amount(250 + j)})
		}
		if err := db.History().UpsertEntry(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	for i := range sz.events {
		id, _ := uuid.NewV7()
		at := now.Add(-time.Duration(i%(80*24*60)) * time.Minute)
		if i%1000 == 999 {
			at = now.Add(-event.DefaultRetention - time.Duration(1+i%24)*time.Hour) // past the retention: not copied
		}
		e := event.Event{ID: id.String(), Actor: fmt.Sprint("u:user", i%5000), Type: []event.Type{event.View, event.Click, event.AddToCart, event.Search}[i%4],
			At: at, ProductID: fmt.Sprintf("p-%05d", i%1000), Details: map[string]string{"src": "bench", "n": strconv.Itoa(i)}}
		if err := db.Events().AppendEvent(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	var ps []catalog.Product
	for i := range sz.products {
		at := now.Add(-time.Duration(i) * time.Minute)
		ps = append(ps, catalog.Product{ID: fmt.Sprintf("p-%05d", i), Name: fmt.Sprint("Product ", i), Description: "A product for the benchmark",
			Category: []string{"books", "toys", "garden", "music"}[i%4], Price: money.Amount(100 + i%5000), Inactive: i%50 == 49,
			Attributes: map[string]string{"color": []string{"red", "blue"}[i%2], "size": "m"},
			Stock:      map[string]int64{"eu-west": int64(i % 40), "us-east": 3, "ap-south": int64(i % 7)},
			CreatedAt:  at, UpdatedAt: at.Add(time.Duration(i%30) * time.Second)})
		if len(ps) == 1000 || i == sz.products-1 {
			if err := db.Products().CreateProducts(ctx, ps); err != nil {
				b.Fatal(err)
			}
			ps = ps[:0]
		}
	}
	return path
}

// exportCSV writes f's live rows, read whole from src, as CSV files of the target tables'
// columns plus write_ts (the write time) and ttl_s (ttlLeft at now) where Backfill's write
// path sets them. It returns the files by table and the live row count (source rows, not
// CSV records).
func exportCSV(ctx context.Context, src *Source, f Family, dir string, now time.Time) (map[string]string, int, error) {
	rows, err := src.Read(ctx, f, Range{})
	if err != nil {
		return nil, 0, err
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
	}
	files := map[string]*csvFile{}
	out := func(table string, header []string) (*csvFile, error) {
		if w := files[table]; w != nil {
			return w, nil
		}
		fh, err := os.Create(filepath.Join(dir, string(f)+"-"+table+".csv"))
		if err != nil {
			return nil, err
		}
		w := &csvFile{f: fh, w: bufio.NewWriter(fh)}
		files[table] = w
		return w, w.Write(header)
	}
	live, seen := 0, map[string]bool{}
	for _, r := range rows {
		ttl := ttlLeft(r.Expires, now)
		if ttl < 0 {
			continue
		}
		live++
		micros := func(t time.Time) string { return time.UnixMicro(t.UnixMicro()).UTC().Format(time.RFC3339Nano) }
		meta := []string{micros(r.Modified), strconv.Itoa(ttl)}
		switch {
		case r.Session != nil:
			s := r.Session
			w, err := out("sessions", []string{"session_id", "user_id", "created_at", "last_active", "expires_at", "ip", "user_agent", "status", "data", "write_ts", "ttl_s"})
			if err != nil {
				return nil, 0, err
			}
			ip := ""
			if v := canonIP(s.IP); v != nil {
				ip = v.String()
			}
			data, _ := json.Marshal(s.Data)
			if err := w.Write(append([]string{s.ID, s.UserID, ts(s.CreatedAt), ts(s.LastActive), ts(s.ExpiresAt), ip, s.UserAgent, string(s.Status), string(data)}, meta...)); err != nil {
				return nil, 0, err
			}
		case r.Cart != nil:
			c := r.Cart
			table, key, owner := cartTable(c.Owner)
			w, err := out(table, []string{key, "cart_id", "product_id", "active_cart", "status", "order_id", "created_at", "updated_at", "expires_at",
				"checkout_order", "checkout_until", "category", "quantity", "added_at", "write_ts", "ttl_s"})
			if err != nil {
				return nil, 0, err
			}
			id, err := TimeUUID(c.ID)
			if err != nil {
				return nil, 0, err
			}
			active := ""
			if c.Status == cart.Active {
				active = id.String()
			}
			recs := [][]string{{owner, id.String(), emptyString, active, string(c.Status), c.OrderID, ts(c.CreatedAt), ts(c.UpdatedAt), ts(c.ExpiresAt),
				c.CheckoutOrder, ts(c.CheckoutUntil), "", "", ""}}
			for _, it := range c.Items {
				recs = append(recs, []string{owner, id.String(), it.ProductID, "", "", "", "", "", "", "", "", it.Category, strconv.FormatInt(it.Quantity, 10), ts(it.AddedAt)})
			}
			for _, rec := range recs {
				if err := w.Write(append(rec, meta...)); err != nil {
					return nil, 0, err
				}
			}
		case r.Entry != nil:
			// UpsertEntry: the bucket index row (no write time), then the entry at its UpdatedAt.
			e := r.Entry
			bucket := strconv.Itoa(e.PlacedAt.UTC().Year()*100 + int(e.PlacedAt.UTC().Month())) // cassandrastore's bucketOf
			if !seen[e.UserID+"|"+bucket] {
				seen[e.UserID+"|"+bucket] = true
				w, err := out("order_history_buckets", []string{"user_id", "bucket"})
				if err != nil {
					return nil, 0, err
				}
				if err := w.Write([]string{e.UserID, bucket}); err != nil {
					return nil, 0, err
				}
			}
			w, err := out("order_history", []string{"user_id", "bucket", "placed_at", "order_id", "status", "zone", "total", "updated_at", "items", "write_ts"})
			if err != nil {
				return nil, 0, err
			}
			lines := make([]map[string]any, len(e.Items))
			for i, it := range e.Items { // the order_line UDT as a JSON object
				lines[i] = map[string]any{"product_id": it.ProductID, "category": it.Category, "name": it.Name, "quantity": it.Quantity, "unit_price": int64(it.UnitPrice)}
			}
			items, _ := json.Marshal(lines)
			if err := w.Write([]string{e.UserID, bucket, ts(e.PlacedAt), e.OrderID, string(e.Status), e.Zone, strconv.FormatInt(int64(e.Total), 10),
				ts(e.UpdatedAt), string(items), micros(r.Modified.Truncate(time.Millisecond))}); err != nil {
				return nil, 0, err
			}
		case r.Event != nil:
			// AppendEvent: no client write time, TTL until the event's time plus the retention.
			e := r.Event
			w, err := out("user_events", []string{"actor", "event_date", "at", "event_id", "type", "product_id", "details", "ttl_s"})
			if err != nil {
				return nil, 0, err
			}
			details, _ := json.Marshal(e.Details)
			if err := w.Write([]string{e.Actor, event.Day(e.At).Format(time.DateOnly), ts(e.At), e.ID, string(e.Type), e.ProductID, string(details), strconv.Itoa(ttl)}); err != nil {
				return nil, 0, err
			}
		case r.Product != nil:
			// InsertIfAbsent: the products row and, while active, the two search rows, all at
			// cassandrastore.BackfillWriteTime (1 µs under the product's stamp).
			p := r.Product
			attrs, _ := json.Marshal(p.Attributes)
			stock, _ := json.Marshal(p.Stock)
			cols := []string{"product_id", "name", "description", "active", "category", "price", "attributes", "stock", "created_at", "updated_at"}
			vals := []string{p.ID, p.Name, p.Description, strconv.FormatBool(!p.Inactive), p.Category, strconv.FormatInt(int64(p.Price), 10),
				string(attrs), string(stock), ts(p.CreatedAt), ts(p.UpdatedAt)}
			wt := strconv.FormatInt(cassandrastore.BackfillWriteTime(*p), 10)
			w, err := out("products", append(cols, "write_ts"))
			if err != nil {
				return nil, 0, err
			}
			if err := w.Write(append(vals, wt)); err != nil {
				return nil, 0, err
			}
			if p.Inactive {
				continue
			}
			search := append([]string{strconv.Itoa(cassandrastore.CatalogBucket(p.ID))}, append(vals, wt)...)
			for _, table := range []string{"products_by_category", "products_by_category_newest"} {
				w, err := out(table, append(append([]string{"bucket"}, cols...), "write_ts"))
				if err != nil {
					return nil, 0, err
				}
				if err := w.Write(search); err != nil {
					return nil, 0, err
				}
			}
		}
	}
	paths := map[string]string{}
	for table, w := range files {
		if err := w.Close(); err != nil {
			return nil, 0, err
		}
		paths[table] = w.f.Name()
	}
	return paths, live, nil
}

// emptyString is a field holding "" (a cart's header row's product_id): written quoted, it
// is an empty string to DSBulk, while a field "" is written unquoted, a null left unset.
const emptyString = "\x00"

// csvFile writes RFC 4180 records with every non-null field quoted.
type csvFile struct {
	f *os.File
	w *bufio.Writer
}

func (c *csvFile) Write(rec []string) error {
	for i, v := range rec {
		if i > 0 {
			c.w.WriteByte(',')
		}
		switch v {
		case "":
		case emptyString:
			c.w.WriteString(`""`)
		default:
			c.w.WriteString(`"` + strings.ReplaceAll(v, `"`, `""`) + `"`)
		}
	}
	_, err := c.w.WriteString("\n")
	return err
}

func (c *csvFile) Close() error {
	if err := c.w.Flush(); err != nil {
		c.f.Close()
		return err
	}
	return c.f.Close()
}
