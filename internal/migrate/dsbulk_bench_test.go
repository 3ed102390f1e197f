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

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// BenchmarkBackfillVsDSBulk loads the same sessions and carts into one one-node Cassandra on
// launcher.BenchTestAddr with Backfill (4 and 8 workers) and with DSBulk (CSV exported from
// the same rows, writetime and TTL mapped per row, QUORUM), each into a fresh keyspace,
// rounds times in rotating order, and reports rows/s (source rows: sessions, carts). Not part
// of make test:
//
//	go test ./internal/migrate -run '^$' -bench BenchmarkBackfillVsDSBulk -benchtime 1x -timeout 60m
//
// DSBulk comes from $SHARDMART_DSBULK (a dsbulk executable) or else launcher.EnsureDSBulk
// (Maven Central); without either the benchmark fails. Sizes: $SHARDMART_BENCH_SESSIONS
// (50000), $SHARDMART_BENCH_CARTS (10000, 2-4 lines each), $SHARDMART_BENCH_ROUNDS (3).
func BenchmarkBackfillVsDSBulk(b *testing.B) {
	ctx := context.Background()
	dsbulk := dsbulkRunner(b)
	nSess, nCarts, rounds := envInt(b, "SHARDMART_BENCH_SESSIONS", 50000), envInt(b, "SHARDMART_BENCH_CARTS", 10000), envInt(b, "SHARDMART_BENCH_ROUNDS", 3)
	c := launcher.ForTest(b, launcher.Options{Nodes: 1, BaseAddr: launcher.BenchTestAddr, HeapMB: 1024})
	hosts := c.Hosts()
	dir := b.TempDir()
	path := benchSeed(b, dir, nSess, nCarts)
	src, err := OpenSource(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	csvs := map[Family]map[string]string{}
	live := map[Family]int{}
	for _, f := range []Family{Sessions, Carts} {
		csvs[f], live[f], err = exportCSV(ctx, src, f, dir, time.Now())
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("source: %d sessions (%d live), %d carts (%d live); %s", nSess, live[Sessions], nCarts, live[Carts], loadavg())

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
		for _, f := range []Family{Sessions, Carts} {
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
	for _, f := range []Family{Sessions, Carts} {
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
	lib, err := launcher.EnsureDSBulk(ctx, launcher.DefaultCacheDir())
	if err != nil {
		b.Fatalf("DSBulk is needed for this benchmark: set SHARDMART_DSBULK to a dsbulk executable, or let it be fetched from Maven Central: %v", err)
	}
	out, err := launcher.DSBulkCommand(ctx, lib, "--version").CombinedOutput()
	if err != nil {
		b.Fatalf("dsbulk --version: %v\n%s", err, out)
	}
	b.Logf("%s (jars in %s)", strings.TrimSpace(string(out)), lib)
	return func(ctx context.Context, args ...string) *exec.Cmd { return launcher.DSBulkCommand(ctx, lib, args...) }
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

// checkWriteMeta checks that a live row's cells carry the source's modification time as their
// write time and a TTL (when the row expires), as Backfill writes them.
func checkWriteMeta(ctx context.Context, src *Source, s *gocql.Session, f Family) error {
	rows, err := src.Read(ctx, f, Range{})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if ttlLeft(r.Expires, time.Now()) <= 0 {
			continue
		}
		var wt int64
		var ttl int
		q := s.Query(`SELECT writetime(status), ttl(status) FROM sessions WHERE session_id = ?`, r.Key)
		if f == Carts {
			id, err := TimeUUID(r.Key)
			if err != nil {
				return err
			}
			table, key, owner := cartTable(r.Cart.Owner)
			q = s.Query(fmt.Sprintf(`SELECT writetime(status), ttl(status) FROM %s WHERE %s = ? AND cart_id = ? AND product_id = ''`, table, key), owner, id)
		}
		if err := q.WithContext(ctx).Scan(&wt, &ttl); err != nil {
			return fmt.Errorf("write time of %s %s: %w", f, r.Key, err)
		}
		if wt != r.Modified.UnixMicro() || (ttl == 0) != r.Expires.IsZero() {
			return fmt.Errorf("%s %s: writetime %d ttl %d, want %d and a TTL iff it expires (%v)", f, r.Key, wt, ttl, r.Modified.UnixMicro(), r.Expires)
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

// benchSeed writes n sessions (1 in 20 expired) and m carts of 2-4 lines (odd ones guest
// carts) through the embedded store's repositories.
func benchSeed(b *testing.B, dir string, n, m int) string {
	ctx := context.Background()
	path := filepath.Join(dir, "shop.db")
	db, err := sqlitestore.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	for i := range n {
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
	for i := range m {
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
	return path
}

// exportCSV writes f's live rows, read whole from src, as CSV files of the target tables'
// columns plus write_ts (the row's Modified) and ttl_s (ttlLeft at now), the values Backfill
// writes with. It returns the files by table and the live row count.
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
	live := 0
	for _, r := range rows {
		ttl := ttlLeft(r.Expires, now)
		if ttl < 0 {
			continue
		}
		live++
		meta := []string{time.UnixMicro(r.Modified.UnixMicro()).UTC().Format(time.RFC3339Nano), strconv.Itoa(ttl)}
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
