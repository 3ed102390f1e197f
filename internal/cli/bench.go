package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/tracing"
)

// benchOptions are `bench`'s settings.
type benchOptions struct {
	// urls are the API processes requests are spread over, round robin (none: in-process).
	urls                                   []string
	adminToken, scenario, categories, zone string
	// workloads and placements (in-process servers) alternate in one run when several.
	workloads, placements []string
	rounds                int
	// The in-process server's backends (without --url).
	cassandraHosts, cassandraKeyspace, mongoURI, mongoDB string
	cassandraConn                                        cassandraConnFlags
	cassandraConns                                       int

	rate                   float64
	duration, warmup       time.Duration
	timeout                time.Duration
	maxInFlight, users     int
	seed                   uint64
	zipf                   float64
	flashProducts          int
	flashStock             int64
	json                   bool
	findMax                bool
	findMaxFactor, maxRate float64
	findMaxRefine          int
	findMaxP99, loginP99   time.Duration
	findMaxRule            string
	findMaxErrors          float64
	// serverPIDs and dbPIDs are processes on this host whose CPU is reported per request;
	// dbDirs are `cassandra up` / `mongo up` directories whose pidfiles name more.
	serverPIDs, dbPIDs []int
	dbDirs             []string
	// traceRatio is the in-process server's --trace-sample-ratio.
	traceRatio float64
	// cpuProfile is the file of --cpu-profile (empty: none).
	cpuProfile string
}

// newCmdBench builds `bench`; runF, if not nil, replaces runBench (tests).
func newCmdBench(stdio IO, runF func(context.Context, benchOptions) error) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Open-loop HTTP load: a shop's request mix (or a flash sale) at a fixed arrival rate, HDR percentiles",
		Long: `bench sends requests at a constant rate (--rate) whatever the server does, and measures each
request's latency from the moment it was due, so queueing is never hidden (no coordinated
omission). A client that cannot deliver the rate says so (achieved vs target; requests past
--max-in-flight are dropped and counted as errors).

Scenarios: "mix" is browse and search 60 %, product page 15 %, cart 15 %, checkout 5 %, events
4.5 %, login 0.5 %, with Zipf-skewed products and categories; "flash-sale" is many buyers
after a few new products with little stock (409 insufficient-stock is an expected answer; the
stock is checked through the API at the end: oversold must be false).

Workloads: "population" (the default) spreads requests uniformly over --users (2,000 by
default) and sends each user's requests one at a time, as a browser does: a request comes from
a user with none in flight. "legacy" is the earlier model: 200 Zipf-skewed users, one user's
cart and checkout requests queued in the client. The in-process server's users are created in
its stores with one precomputed bcrypt hash and a session each (seconds for thousands). Against
--url with --admin-token, a server started with --admin-bulk-users creates them through
POST /v1/admin/users (one bcrypt hash per 500 users) and bench logs each one in (one bcrypt
comparison each); without the route they are registered through the API one by one (two bcrypt
operations each), which bench says on stderr.

CPU per request: the CPU time of the server (the bench process itself when the server runs
in it: server and load generator together; --server-pid for a server on this host) and of
database processes on this host (--db-pid, or --db-dir naming a cassandra up or mongo up
directory) over the recorded window, divided by the requests answered in it.

--url may name several processes of one shop (comma-separated or repeated): requests go to
each in turn, as through a round-robin load balancer.

Without --url it starts its own server in-process on a temporary embedded store with demo data
(--placement moves families to Cassandra or MongoDB as serve does), with rate limits off.
--placement repeated starts one server per placement, and several --workload values run on
each: their runs alternate (find-max: each one's next step in turn; a fixed rate: --rounds
times each in turn), so the comparison is taken under the same machine load.
Against --url, run the server with its limits off (--limit-login-client 0 --limit-login-account 0
--limit-sessions-client 0 --limit-events-session 0 --limit-events-client 0
--limit-register-client 0) and give its
--admin-token, or the limits' 429s count as errors.

--find-max steps the rate up from --rate by --find-max-factor, then bisects, and reports the
highest rate at which every request type's p99 stays under --find-max-p99, except login's,
under --find-max-login-p99 (a bcrypt comparison by design), with errors under
--find-max-errors; each failed step names the type that failed it. --find-max-rule total
judges the total's p99 instead (the earlier rule).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.maxInFlight < 1 || o.users < 0 || o.rate <= 0 || o.rounds < 1 {
				return fmt.Errorf("--rate, --max-in-flight and --rounds must be positive, --users not negative")
			}
			for _, w := range o.workloads {
				if !slices.Contains(loadgen.Workloads, w) {
					return fmt.Errorf("unknown --workload %q (have %s)", w, strings.Join(loadgen.Workloads, ", "))
				}
			}
			if len(o.workloads) == 0 {
				return fmt.Errorf("--workload names none (have %s)", strings.Join(loadgen.Workloads, ", "))
			}
			if len(o.placements) == 0 {
				o.placements = []string{""}
			}
			if len(o.urls) > 0 && cmd.Flags().Changed("placement") {
				return fmt.Errorf("--placement is the in-process server's: a server at --url has its own")
			}
			if o.findMaxRule != findMaxPerType && o.findMaxRule != findMaxTotal {
				return fmt.Errorf("unknown --find-max-rule %q (have %s, %s)", o.findMaxRule, findMaxPerType, findMaxTotal)
			}
			if o.cpuProfile != "" && (o.findMax || o.rounds > 1 || len(o.workloads) > 1 || len(o.placements) > 1) {
				return fmt.Errorf("--cpu-profile profiles one run: not with --find-max, --rounds above 1 or several --workload or --placement")
			}
			if !slices.Contains(loadgen.Scenarios, o.scenario) {
				return fmt.Errorf("unknown --scenario %q (have %s)", o.scenario, strings.Join(loadgen.Scenarios, ", "))
			}
			return runOrRunF(cmd.Context(), stdio, o, runBench, runF)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.urls, "url", nil, "base URL of a running API; several (comma-separated or repeated) are one shop's processes, sent requests in turn like a round-robin balancer (default: start one in-process with demo data)")
	f.StringVar(&o.adminToken, "admin-token", "", "admin token of --url's server: tops up stock, creates the flash sale's products and, when the server runs with --admin-bulk-users, the users")
	f.StringVar(&o.scenario, "scenario", loadgen.ScenarioMix, "mix or flash-sale")
	f.StringVar(&o.categories, "categories", "electronics,books,clothing,home,toys,sports,beauty,grocery,garden,automotive", "categories browsed and bought from, most popular first")
	f.StringVar(&o.zone, "zone", demo.Zones[0], "stock zone orders take from")
	f.StringArrayVar(&o.placements, "placement", nil, `in-process server only: which backend holds which family, as serve's --placement, or embedded, mongo (every family), cassandra (carts, sessions, events, history, catalog); repeat it to compare several, one server each, their runs in turn (default: everything embedded)`)
	f.StringVar(&o.cassandraHosts, "cassandra-hosts", "127.0.0.1", "in-process server only: Cassandra contact points")
	f.StringVar(&o.cassandraKeyspace, "cassandra-keyspace", "shardmart", "in-process server only: Cassandra keyspace (schema applied)")
	o.cassandraConn.register(f)
	f.IntVar(&o.cassandraConns, "cassandra-conns-per-host", 0, "in-process server only: Cassandra driver connections per node (0: the default, 2)")
	f.StringVar(&o.mongoURI, "mongo-uri", "", "in-process server only: MongoDB connection string")
	f.StringVar(&o.mongoDB, "mongo-db", "shardmart", "in-process server only: MongoDB database")
	f.Float64Var(&o.rate, "rate", 200, "requests per second (with --find-max: the first step)")
	f.DurationVar(&o.duration, "duration", 30*time.Second, "recorded time per run (per step with --find-max)")
	f.DurationVar(&o.warmup, "warmup", 5*time.Second, "time at the rate before recording (per step)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "a request unanswered after this is an error")
	f.IntVar(&o.maxInFlight, "max-in-flight", 512, "concurrent requests; a request due beyond it is dropped and counted as an error")
	f.StringSliceVar(&o.workloads, "workload", []string{loadgen.WorkloadPopulation}, "population (users drawn uniformly, one request in flight each) or legacy (Zipf-skewed users, cart and checkout queued per user); several (comma-separated) run in turn")
	f.IntVar(&o.rounds, "rounds", 1, "without --find-max: runs of every placement and workload, in turn")
	f.IntVar(&o.users, "users", 0, "users provisioned before the run (0: 2,000, or 200 with --workload legacy)")
	f.Uint64Var(&o.seed, "seed", 1, "random seed: the same seed sends the same request sequence")
	f.Float64Var(&o.zipf, "zipf", 1.1, "Zipf skew (> 1) of users, products and categories")
	f.IntVar(&o.flashProducts, "flash-products", 3, "flash-sale: products created")
	f.Int64Var(&o.flashStock, "flash-stock", 100, "flash-sale: units of each in --zone")
	f.BoolVar(&o.json, "json", false, "print the report as JSON on stdout")
	f.BoolVar(&o.findMax, "find-max", false, "search for the highest rate within --find-max-p99 and --find-max-errors")
	f.Float64Var(&o.findMaxFactor, "find-max-factor", 1.5, "find-max: rate multiplier between steps")
	f.Float64Var(&o.maxRate, "find-max-limit", 0, "find-max: highest rate tried (0: none)")
	f.IntVar(&o.findMaxRefine, "find-max-refine", 2, "find-max: bisection steps after the first failing rate")
	f.DurationVar(&o.findMaxP99, "find-max-p99", 50*time.Millisecond, "find-max: every request type's p99 but login's must stay below this (with --find-max-rule total: the total's)")
	f.DurationVar(&o.loginP99, "find-max-login-p99", 250*time.Millisecond, "find-max: login's p99 must stay below this (a login is a bcrypt comparison by design)")
	f.StringVar(&o.findMaxRule, "find-max-rule", findMaxPerType, "find-max: per-type (each type within its bound) or total (the total's p99 within --find-max-p99, as before)")
	f.Float64Var(&o.findMaxErrors, "find-max-errors", 0.01, "find-max: the error rate (failed + dropped) must stay below this")
	f.IntSliceVar(&o.serverPIDs, "server-pid", nil, "with --url: pid of a server process on this host, whose CPU per request is reported (repeatable)")
	f.IntSliceVar(&o.dbPIDs, "db-pid", nil, "pid of a database process on this host, whose CPU per request is reported (repeatable)")
	f.StringSliceVar(&o.dbDirs, "db-dir", nil, "directory of a `cassandra up` or `mongo up` on this host: the CPU per request of each process its pidfiles name is reported (repeatable)")
	f.Float64Var(&o.traceRatio, "trace-sample-ratio", 0, "in-process server only: fraction of requests traced, as serve's flag; the breakdown of where each request type's time went is printed when the server keeps traces (with --url: the server's own ratio, read with --admin-token; its requests are picked by bench's clock, so the two machines' clocks must agree)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a pprof CPU profile of the bench process over the recorded window to this file (one fixed-rate run only; without --url it holds the in-process server and the load generator): read it with go tool pprof")
	fromEnv(f, "admin-token", "SHARDMART_ADMIN_TOKEN")
	return cmd
}

// The bench's user populations and find-max rules.
const (
	defaultBenchUsers = 2000
	legacyBenchUsers  = 200
	findMaxPerType    = "per-type"
	findMaxTotal      = "total"
)

// benchJSON is --json's document for one placement and workload.
type benchJSON struct {
	Target   string            `json:"target"`
	Workload string            `json:"workload"`
	Users    int               `json:"users"`
	Machine  map[string]string `json:"machine,omitempty"`
	Report   *loadgen.Report   `json:"report,omitempty"`
	// Reports are the fixed-rate runs of --rounds above 1, in order.
	Reports []loadgen.Report `json:"reports,omitempty"`
	MaxRate *float64         `json:"max_rate,omitempty"`
	Steps   []loadgen.Step   `json:"steps,omitempty"`
	// Breakdown is where each request type's time went, from the server's sampled traces of
	// the run reported (find-max: the best step, or the first when none passed; absent when
	// the server keeps none).
	Breakdown []tracing.Breakdown `json:"breakdown,omitempty"`
}

// benchComparisonJSON is --json's document when several placements or workloads alternate.
type benchComparisonJSON struct {
	Machine map[string]string `json:"machine"`
	Arms    []benchJSON       `json:"arms"`
}

// benchArm is one placement under one workload: its server, its users and its runs.
type benchArm struct {
	target, workload string
	users            int
	shop             *loadgen.Shop
	procs            []loadgen.Process
	traces           *stepTraces
	search           *loadgen.MaxSearch
	reports          []loadgen.Report
}

func (a *benchArm) name() string { return fmt.Sprintf("%s, %s workload", a.target, a.workload) }

// benchPlacementAliases name the placements compared most often.
var benchPlacementAliases = map[string]string{
	"embedded":  "",
	"mongo":     "orders=mongo,carts=mongo,sessions=mongo,events=mongo,history=mongo,catalog=mongo",
	"cassandra": "carts=cassandra,sessions=cassandra,events=cassandra,history=cassandra,catalog=cassandra",
}

func expandPlacement(p string) string {
	if full, ok := benchPlacementAliases[p]; ok {
		return full
	}
	return p
}

// usersFor is --users, or the workload's own default.
func (o benchOptions) usersFor(workload string) int {
	switch {
	case o.users > 0:
		return o.users
	case workload == loadgen.WorkloadLegacy:
		return legacyBenchUsers
	}
	return defaultBenchUsers
}

func runBench(ctx context.Context, stdio IO, o benchOptions) error {
	log := stdio.Err
	var bases []string
	for _, u := range o.urls {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			bases = append(bases, u)
		}
	}
	client := &http.Client{Timeout: o.timeout, Transport: &http.Transport{MaxIdleConns: o.maxInFlight,
		MaxIdleConnsPerHost: o.maxInFlight, IdleConnTimeout: time.Minute}}
	dbs, err := databaseProcesses(o.dbPIDs, o.dbDirs)
	if err != nil {
		return err
	}
	// One server per placement (or the --url processes), each workload's users on each.
	type target struct {
		name, admin string
		bases       []string
		provision   loadgen.Provisioner
		procs       []loadgen.Process
	}
	var targets []target
	if len(bases) > 0 {
		t := target{name: strings.Join(bases, ", "), admin: o.adminToken, bases: bases}
		for _, pid := range o.serverPIDs {
			t.procs = append(t.procs, loadgen.Process{Name: "server", PID: pid})
		}
		targets = append(targets, t)
	} else {
		for _, p := range o.placements {
			full := expandPlacement(p)
			fmt.Fprintf(log, "starting a server in-process (temporary embedded store, placement %q, demo data)...\n", full)
			addr, s, stop, err := startBenchServer(ctx, o, full)
			if err != nil {
				return err
			}
			defer stop()
			fmt.Fprintf(log, "server on %s\n", addr)
			targets = append(targets, target{name: "in-process, placement " + orDefault(p, "embedded default"), admin: benchAdminToken,
				bases: []string{"http://" + addr}, provision: storeProvisioner(s.Stores.Users, s.Sessions),
				procs: []loadgen.Process{{Name: "bench process (in-process servers and load generator)"}}})
		}
	}
	var arms []*benchArm
	for _, t := range targets {
		for _, w := range o.workloads {
			a := &benchArm{target: t.name, workload: w, users: o.usersFor(w), procs: append(slices.Clip(t.procs), dbs...),
				traces: &stepTraces{log: log, client: client, bases: t.bases, admin: t.admin}}
			fmt.Fprintf(log, "preparing %s (%d users)\n", a.name(), a.users)
			a.shop, err = loadgen.Prepare(ctx, loadgen.Config{BaseURLs: t.bases, Client: client, AdminToken: t.admin, Scenario: o.scenario,
				Workload: w, Users: a.users, Provision: t.provision, Seed: o.seed, ZipfS: o.zipf,
				Categories: strings.Split(o.categories, ","), Zone: o.zone, FlashProducts: o.flashProducts, FlashStock: o.flashStock, Log: log})
			if err != nil {
				return fmt.Errorf("prepare the workload of %s: %w", a.name(), err)
			}
			arms = append(arms, a)
		}
	}
	// Each run's breakdown is read right after it, by rate: find-max prints its best step's,
	// and the ring keeps only the latest traces.
	runAt := func(ctx context.Context, a *benchArm, rate float64) (loadgen.Report, error) {
		recorded := time.Now().Add(o.warmup)
		fmt.Fprintf(log, "running %s on %s at %.0f/s: %s warm-up, %s recorded...\n", o.scenario, a.name(), rate, o.warmup, o.duration)
		sched := loadgen.Schedule{Rate: rate, Warmup: o.warmup, Duration: o.duration, MaxInFlight: o.maxInFlight, CPU: a.procs}
		var profErr error
		if o.cpuProfile != "" {
			sched.Profile = func() func() { return startCPUProfile(o.cpuProfile, &profErr) }
		}
		rep, err := loadgen.Run(ctx, sched, a.shop.Next)
		if err == nil && profErr != nil {
			err = profErr
		}
		rep.Scenario = o.scenario
		if err == nil {
			a.traces.read(ctx, rate, recorded)
		}
		return rep, err
	}
	machine := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "os_arch": runtime.GOOS + "/" + runtime.GOARCH, "go": runtime.Version()}
	if o.findMax {
		return benchFindMax(ctx, stdio, o, arms, runAt, machine)
	}
	// Fixed rate: each round runs every arm once, in turn.
	for round := range o.rounds {
		for _, a := range arms {
			rep, err := runAt(ctx, a, o.rate)
			if err != nil {
				return err
			}
			if len(arms) > 1 || o.rounds > 1 {
				fmt.Fprintf(log, "round %d, %s: achieved %.0f/s, p50 %.2f ms, p99 %.2f ms, errors %.2f%%%s\n", round+1, a.name(),
					rep.AchievedRate, rep.Total.P50, rep.Total.P99, 100*rep.Total.ErrorRate, cpuSummary(rep.CPU))
			}
			a.reports = append(a.reports, rep)
		}
	}
	var docs []benchJSON
	for _, a := range arms {
		last := &a.reports[len(a.reports)-1]
		if last.Flash, err = a.shop.CheckFlashSale(ctx); err != nil {
			return err
		}
		doc := benchJSON{Target: a.target, Workload: a.workload, Users: a.users, Report: last, Breakdown: a.traces.byRate[o.rate]}
		if len(a.reports) > 1 {
			doc.Reports = a.reports
		}
		docs = append(docs, doc)
		if o.json {
			continue
		}
		fmt.Fprintf(stdio.Out, "%s against %s, %s workload, %d users\n", o.scenario, a.target, a.workload, a.users)
		for i, rep := range a.reports {
			if len(a.reports) > 1 {
				fmt.Fprintf(stdio.Out, "round %d:\n", i+1)
			}
			if err := rep.WriteText(stdio.Out); err != nil {
				return err
			}
		}
		if err := writeBreakdown(stdio.Out, doc.Breakdown, fmt.Sprintf("%.0f/s", o.rate)); err != nil {
			return err
		}
	}
	if o.json {
		err = writeBenchJSON(stdio.Out, machine, docs)
	}
	for _, d := range docs {
		if f := d.Report.Flash; err == nil && f != nil && f.Oversold {
			err = fmt.Errorf("flash sale OVERSOLD on %s: %d units confirmed, %d in stock at the start", d.Target, f.UnitsSold, f.StockBefore)
		}
	}
	return err
}

// benchFindMax runs one find-max per arm, their steps in turn (the first arm's first step,
// the second's, ...), so that every placement's steps meet the machine in the same state.
func benchFindMax(ctx context.Context, stdio IO, o benchOptions, arms []*benchArm,
	runAt func(context.Context, *benchArm, float64) (loadgen.Report, error), machine map[string]string) error {
	log := stdio.Err
	fm := loadgen.FindMax{Start: o.rate, Factor: o.findMaxFactor, Limit: o.maxRate, Refine: o.findMaxRefine,
		MaxP99: o.findMaxP99, TypeP99: map[string]time.Duration{loadgen.Login: o.loginP99},
		Total: o.findMaxRule == findMaxTotal, MaxErrorRate: o.findMaxErrors}
	for _, a := range arms {
		var err error
		if a.search, err = fm.Begin(); err != nil {
			return err
		}
	}
	for running := true; running; {
		running = false
		for _, a := range arms {
			rate, ok := a.search.Next()
			if !ok {
				continue
			}
			running = true
			rep, err := runAt(ctx, a, rate)
			if err != nil {
				return fmt.Errorf("find-max of %s at %.0f/s: %w", a.name(), rate, err)
			}
			st := a.search.Record(rep)
			verdict := "pass"
			if !st.Pass {
				verdict = "FAIL: " + st.Why
			}
			t := st.Report.Total
			on := ""
			if len(arms) > 1 {
				on = " (" + a.name() + ")"
			}
			fmt.Fprintf(log, "step %.0f/s%s: achieved %.0f/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, errors %.2f%%%s -> %s\n",
				st.Rate, on, st.Report.AchievedRate, t.P50, t.P99, t.P999, 100*t.ErrorRate, cpuSummary(st.Report.CPU), verdict)
		}
	}
	rule := fmt.Sprintf("p99 < %s for every type, login < %s,", o.findMaxP99, o.loginP99)
	if fm.Total {
		rule = fmt.Sprintf("total p99 < %s", o.findMaxP99)
	}
	var docs []benchJSON
	for _, a := range arms {
		best, steps := a.search.Best(), a.search.Steps()
		doc := benchJSON{Target: a.target, Workload: a.workload, Users: a.users, MaxRate: &best, Steps: steps}
		shown, ok := shownStep(steps, best)
		if ok {
			doc.Breakdown = a.traces.byRate[shown.Rate]
		}
		docs = append(docs, doc)
		if o.json {
			continue
		}
		fmt.Fprintf(stdio.Out, "highest rate sustained with %s and errors < %.1f%%: %.0f/s (%s, %s workload, %d users, %s)\n",
			rule, 100*o.findMaxErrors, best, o.scenario, a.workload, a.users, a.target)
		if !ok {
			continue
		}
		if err := shown.Report.WriteText(stdio.Out); err != nil {
			return err
		}
		if err := writeBreakdown(stdio.Out, doc.Breakdown, fmt.Sprintf("the step above, %.0f/s", shown.Rate)); err != nil {
			return err
		}
		if len(arms) > 1 {
			fmt.Fprintln(stdio.Out)
		}
	}
	if o.json {
		return writeBenchJSON(stdio.Out, machine, docs)
	}
	return nil
}

// writeBenchJSON prints one arm's document as before, several as a comparison.
func writeBenchJSON(w io.Writer, machine map[string]string, docs []benchJSON) error {
	if len(docs) == 1 {
		docs[0].Machine = machine
		return writeJSON(w, docs[0])
	}
	return writeJSON(w, benchComparisonJSON{Machine: machine, Arms: docs})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// benchAdminToken guards the bench's own throwaway server, which listens on loopback only.
const benchAdminToken = "bench-local-admin"

// startBenchServer runs serve on a temporary store with o's placement and no rate limits (a
// load generator is one client address), and answers its address and shop; stop shuts it down
// and removes the store.
func startBenchServer(ctx context.Context, bo benchOptions, placement string) (string, *shop.Shop, func(), error) {
	dir, err := os.MkdirTemp("", "shardmart-bench-")
	if err != nil {
		return "", nil, nil, err
	}
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = dir
	o.backend.placement = placement
	o.backend.cassandraHosts, o.backend.cassandraKeyspace = bo.cassandraHosts, bo.cassandraKeyspace
	o.backend.cassandraConn, o.backend.cassandraConns = bo.cassandraConn, bo.cassandraConns
	o.backend.mongoURI, o.backend.mongoDB = bo.mongoURI, bo.mongoDB
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", benchAdminToken
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	o.trace = tracing.Config{SampleRatio: bo.traceRatio, RatioGiven: true, Keep: tracing.DefaultKeep}
	opened := make(chan *shop.Shop, 1)
	o.opened = func(s *shop.Shop) { opened <- s }
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- runServe(sctx, IO{Out: io.Discard, Err: io.Discard}, o, ready) }()
	stop := func() { cancel(); <-errc; os.RemoveAll(dir) }
	select {
	case addr := <-ready:
		// serve listens before it has seeded the empty store: the workload needs the data in.
		if exited, err := waitReady(ctx, "http://"+addr, errc); err != nil {
			if exited {
				cancel()
				os.RemoveAll(dir)
			} else {
				stop()
			}
			return "", nil, nil, fmt.Errorf("start bench server: %w", err)
		}
		// serve opened the shop before it listened.
		return addr, <-opened, stop, nil
	case err := <-errc:
		cancel()
		os.RemoveAll(dir)
		return "", nil, nil, fmt.Errorf("start bench server: %w", err)
	}
}

// benchReadyTimeout bounds the wait for the in-process server's seeding (under a second
// embedded, seconds on MongoDB or Cassandra).
const benchReadyTimeout = 5 * time.Minute

// waitReady polls base's /readyz until it answers 200, the server exits (errc; exited is then
// true) or the timeout.
func waitReady(ctx context.Context, base string, errc <-chan error) (exited bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, benchReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil)
		if err != nil {
			return false, err
		}
		if resp, err := http.DefaultClient.Do(req); err != nil {
			last = err.Error()
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return false, nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		select {
		case err := <-errc:
			return true, fmt.Errorf("server stopped before it was ready: %v", err)
		case <-ctx.Done():
			return false, fmt.Errorf("not ready after %s: /readyz %s", benchReadyTimeout, last)
		case <-tick.C:
		}
	}
}

// startCPUProfile starts a CPU profile into path and returns what stops it and closes the
// file; a failure to start, write or close is left in *errp.
func startCPUProfile(path string, errp *error) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		*errp = fmt.Errorf("--cpu-profile: %w", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		*errp = fmt.Errorf("--cpu-profile: %w", err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			*errp = fmt.Errorf("--cpu-profile: %w", err)
		}
	}
}
