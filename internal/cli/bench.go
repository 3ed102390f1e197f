package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/loadgen"
)

// benchOptions are `bench`'s settings.
type benchOptions struct {
	URL, Scenarios, Categories, Zone, AdminToken string
	Concurrency                                  int
	Duration                                     time.Duration
}

// newCmdBench builds `bench`; runF, if not nil, replaces runBench (tests).
func newCmdBench(stdio IO, runF func(context.Context, benchOptions) error) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test the HTTP API: orders (3 items), cart puts, category search, session lookup",
		Long: `bench drives the HTTP API with concurrent clients and prints requests/s, p50 and p99 per scenario.
Without --url it starts its own server on a temporary embedded store with demo data, so the
numbers include the whole stack on this machine (client and server share the CPUs).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Concurrency < 1 || o.Concurrency > 1024 {
				return fmt.Errorf("--concurrency must be 1..1024")
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runBench(cmd.Context(), stdio, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.URL, "url", "", "base URL of a running API (default: start one on a temporary store)")
	f.StringVar(&o.Scenarios, "scenarios", strings.Join(loadgen.Scenarios, ","), "comma-separated scenarios")
	f.StringVar(&o.Categories, "categories", "electronics,books,clothing,home,toys", "categories to search and buy from")
	f.StringVar(&o.Zone, "zone", demo.Zones[0], "stock zone orders take from")
	f.StringVar(&o.AdminToken, "admin-token", "", "admin token of --url's server: lets the orders scenario top up stock")
	f.IntVar(&o.Concurrency, "concurrency", 8, "concurrent clients")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each scenario runs")
	fromEnv(f, "admin-token", "SHARDMART_ADMIN_TOKEN")
	return cmd
}

func runBench(ctx context.Context, stdio IO, o benchOptions) error {
	base, admin := strings.TrimRight(o.URL, "/"), o.AdminToken
	if base == "" {
		addr, stop, err := startBenchServer(ctx)
		if err != nil {
			return err
		}
		defer stop()
		base, admin = "http://"+addr, benchAdminToken
		fmt.Fprintf(stdio.Out, "started a server on %s (temporary embedded store, demo data)\n", addr)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency}}
	cats := strings.Split(o.Categories, ",")
	products, err := loadgen.DiscoverProducts(ctx, client, base, cats, 100)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trequests\treq/s\tp50\tp99\terrors\t")
	for _, sc := range strings.Split(o.Scenarios, ",") {
		if !contains(loadgen.Scenarios, sc) {
			return fmt.Errorf("unknown scenario %q (have %s)", sc, strings.Join(loadgen.Scenarios, ", "))
		}
		fmt.Fprintf(stdio.Err, "running %s for %s with %d clients...\n", sc, o.Duration, o.Concurrency)
		res, err := loadgen.Run(ctx, loadgen.Config{BaseURL: base, Concurrency: o.Concurrency, Duration: o.Duration,
			Products: products, Categories: cats, Zone: o.Zone, Client: client, AdminToken: admin}, sc)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t\n", res.Scenario, res.Requests, res.PerSecond(),
			res.P50.Round(time.Microsecond), res.P99.Round(time.Microsecond), res.Errors)
		if res.FirstFail != "" {
			fmt.Fprintf(stdio.Err, "  first error: %s\n", res.FirstFail)
		}
	}
	return tw.Flush()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// benchAdminToken guards the bench's own throwaway server, which listens on loopback only.
const benchAdminToken = "bench-local-admin"

// startBenchServer runs serve on a temporary store; stop shuts it down and removes the store.
func startBenchServer(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "shardmart-bench-")
	if err != nil {
		return "", nil, err
	}
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = dir
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", benchAdminToken
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- runServe(sctx, IO{Out: io.Discard, Err: io.Discard}, o, ready) }()
	stop := func() { cancel(); <-errc; os.RemoveAll(dir) }
	select {
	case addr := <-ready:
		return addr, stop, nil
	case err := <-errc:
		cancel()
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start bench server: %w", err)
	}
}
