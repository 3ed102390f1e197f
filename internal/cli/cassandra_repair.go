package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/cassandra/repair"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// jmxPasswordEnv holds the JMX password; --jmx-password-file is the other way, never a flag.
const jmxPasswordEnv = "SHARDMART_CASSANDRA_JMX_PASSWORD"

// repairTarget is how every `cassandra repair` verb reaches the cluster: CQL for the ring,
// the tables and the repair state; JMX targets for nodetool (the run only).
type repairTarget struct {
	Cluster       cassandraClusterOptions
	Hosts         []string
	Keyspace      string
	StateKeyspace string // default Keyspace
	Conn          cassandraConnFlags
}

func (rt *repairTarget) register(f *pflag.FlagSet) {
	f.StringSliceVar(&rt.Hosts, "hosts", nil, "CQL contact points (comma-separated); default: the local cluster of --cassandra-dir")
	f.StringVar(&rt.Keyspace, "keyspace", cassandrastore.DefaultKeyspace, "keyspace to repair")
	f.StringVar(&rt.StateKeyspace, "state-keyspace", "", "keyspace holding the repairer's tables (repair_runs, repair_segments, repair_lease, repair_tables); default --keyspace")
	rt.Conn.register(f)
	fromEnv(f, "hosts", "SHARDMART_CASSANDRA_HOSTS")
	fromEnv(f, "keyspace", "SHARDMART_CASSANDRA_KEYSPACE")
}

func (rt repairTarget) stateKeyspace() string {
	if rt.StateKeyspace != "" {
		return rt.StateKeyspace
	}
	return rt.Keyspace
}

// local is the cluster `cassandra up` started in --cassandra-dir, used when no --hosts are
// given.
func (rt repairTarget) local(stdio IO) (*launcher.Cluster, error) {
	if len(rt.Hosts) > 0 {
		return nil, nil
	}
	c, err := rt.Cluster.open(stdio)
	if err != nil {
		return nil, fmt.Errorf("%w (or name a cluster with --hosts and --jmx-targets)", err)
	}
	return c, nil
}

// session opens CQL on --hosts, or on the local cluster.
func (rt repairTarget) session(ctx context.Context, local *launcher.Cluster) (*gocql.Session, error) {
	conn, err := rt.Conn.connection()
	if err != nil {
		return nil, err
	}
	hosts := rt.Hosts
	if local != nil {
		hosts = local.Hosts()
	}
	return cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: hosts, Keyspace: "-", Connection: conn})
}

// cassandraRepairOptions are `cassandra repair`'s settings.
type cassandraRepairOptions struct {
	Target          repairTarget
	Tables          []string
	Skip            []string
	Incremental     bool
	Schedule        string // cron; empty: once
	JMXTargets      []string
	JMXTargetsFile  string
	JMXUser         string
	JMXPasswordFile string
	JMXSSL          string // nodetool-ssl.properties
	Segments        int
	Parallelism     int
	Intensity       float64
	SegmentTimeout  time.Duration
	Attempts        int
	Backoff         time.Duration
	LeaseTTL        time.Duration
	MetricsAddr     string
}

func newCmdCassandraRepair(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraRepairOptions) error) *cobra.Command {
	var o cassandraRepairOptions
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Segmented anti-entropy repair of any cluster over JMX (nodetool repair -st/-et), once or on a cron schedule",
		Long: `Cuts the token ring into --segments subranges and repairs each with
nodetool repair -st S -et E on one of its replicas, one segment per node at a time, resting
after each as --intensity says, with a timeout and retries. The run's state lives in tables of
the repairer's own (repair_runs, repair_segments) in --state-keyspace, so a repairer that dies
is resumed by the next one, and a lease row keeps two repairers off one cluster.
nodetool reaches the nodes by --jmx-targets or --jmx-targets-file (host:jmxport, or
node=host:jmxport when JMX listens elsewhere), logging in as --jmx-user with the password from
SHARDMART_CASSANDRA_JMX_PASSWORD or --jmx-password-file. Without --hosts it repairs the local
cluster of --cassandra-dir. Without --tables it repairs every table of the keyspace except those
matching --skip: sessions and click events get no anti-entropy repair (short-lived data, hinted
handoff only). With --schedule it repairs on that cron schedule (5 fields, or descriptors such
as @daily) until interrupted, serving /metrics on --metrics-addr.
See also: repair status, pause, resume, abort.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Target.Cluster = *cl
			if o.Schedule != "" {
				if _, err := cron.ParseStandard(o.Schedule); err != nil {
					return fmt.Errorf("--schedule %q: %w", o.Schedule, err)
				}
			}
			if o.Intensity <= 0 || o.Intensity > 1 {
				return fmt.Errorf("--intensity %v: want a number in (0, 1]", o.Intensity)
			}
			return runOrRunF(cmd.Context(), stdio, o, cassandraRepair, runF)
		},
	}
	pf := cmd.PersistentFlags()
	o.Target.register(pf)
	f := cmd.Flags()
	f.StringSliceVar(&o.Tables, "tables", nil, "tables to repair (default: all of the keyspace except --skip)")
	f.StringSliceVar(&o.Skip, "skip", repair.DefaultSkip, "table name patterns left out when --tables is empty")
	f.BoolVar(&o.Incremental, "incremental", false, "incremental subrange repair instead of full (see docs/cassandra.md, Repair)")
	f.StringVar(&o.Schedule, "schedule", "", `cron schedule, e.g. "0 3 * * *"; empty runs once`)
	f.StringSliceVar(&o.JMXTargets, "jmx-targets", nil, "JMX endpoints of the nodes: host:jmxport or node=host:jmxport, comma-separated")
	f.StringVar(&o.JMXTargetsFile, "jmx-targets-file", "", "file of JMX endpoints, one host:jmxport (or node=host:jmxport) per line, # comments")
	f.StringVar(&o.JMXUser, "jmx-user", "", "JMX login; its password from "+jmxPasswordEnv+" or --jmx-password-file")
	f.StringVar(&o.JMXPasswordFile, "jmx-password-file", "", "file holding the JMX password (trailing newline ignored); "+jmxPasswordEnv+" otherwise")
	f.StringVar(&o.JMXSSL, "jmx-ssl-properties", "", "nodetool-ssl.properties file (javax.net.ssl.trustStore, trustStorePassword, keyStore, keyStorePassword): JMX over TLS (nodetool --ssl)")
	f.IntVar(&o.Segments, "segments", 64, "about this many segments over the ring (at least one per token range)")
	f.IntVar(&o.Parallelism, "parallelism", 1, "segments at once, on disjoint replica sets")
	f.Float64Var(&o.Intensity, "intensity", 0.9, "in (0,1]: after a segment that took t, its replicas rest t*(1-intensity)/intensity")
	f.DurationVar(&o.SegmentTimeout, "segment-timeout", 30*time.Minute, "a segment's nodetool is killed after this long, and the segment retried")
	f.IntVar(&o.Attempts, "attempts", 5, "attempts per segment before it counts as failed")
	f.DurationVar(&o.Backoff, "backoff", 30*time.Second, "wait before a segment's second attempt, doubled after each (at most 10 minutes)")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", time.Minute, "the lease expires this long after its holder stops renewing it")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "listen address of /metrics while repairing, e.g. 127.0.0.1:9109; empty: none")
	fromEnv(f, "jmx-targets", "SHARDMART_CASSANDRA_JMX_TARGETS")
	fromEnv(f, "jmx-user", "SHARDMART_CASSANDRA_JMX_USER")
	cmd.AddCommand(newCmdCassandraRepairStatus(stdio, &o.Target, cl),
		newCmdCassandraRepairControl(stdio, &o.Target, cl, "pause", "Pause a run: no new segment starts until resume (those running finish)"),
		newCmdCassandraRepairControl(stdio, &o.Target, cl, "resume", "Resume a paused run"),
		newCmdCassandraRepairControl(stdio, &o.Target, cl, "abort", "Abort a run for good: the repairer kills its nodetool processes and stops"))
	return cmd
}

// targets are the nodes' JMX endpoints: from the flags, else the local cluster's nodes.
func (o cassandraRepairOptions) targets(local *launcher.Cluster) ([]repair.Target, error) {
	text := strings.Join(o.JMXTargets, "\n")
	if o.JMXTargetsFile != "" {
		b, err := os.ReadFile(o.JMXTargetsFile)
		if err != nil {
			return nil, fmt.Errorf("--jmx-targets-file: %w", err)
		}
		text += "\n" + string(b)
	}
	if strings.TrimSpace(text) == "" && local != nil {
		var ts []repair.Target
		for _, n := range local.Nodes() {
			ts = append(ts, repair.Target{Node: n.Addr, Host: "127.0.0.1", Port: n.JMXPort}) // local JMX only
		}
		return ts, nil
	}
	ts, err := repair.ParseTargets(text)
	if err != nil {
		return nil, fmt.Errorf("--jmx-targets/--jmx-targets-file: %w", err)
	}
	return ts, nil
}

// credentials read the JMX password from its file or the environment.
func (o cassandraRepairOptions) credentials() (repair.Credentials, error) {
	c := repair.Credentials{User: o.JMXUser}
	if o.JMXPasswordFile != "" {
		b, err := os.ReadFile(o.JMXPasswordFile)
		if err != nil {
			return c, fmt.Errorf("--jmx-password-file: %w", err)
		}
		if st, err := os.Stat(o.JMXPasswordFile); err == nil && st.Mode().Perm()&0o077 != 0 {
			slog.Warn("a JMX secret is readable by other users of the host: chmod 600 it", "file", o.JMXPasswordFile)
		}
		c.Password = strings.TrimRight(string(b), "\r\n")
	} else {
		c.Password = os.Getenv(jmxPasswordEnv)
	}
	if c.User != "" && c.Password == "" {
		return c, fmt.Errorf("--jmx-user %s: no password (set %s or --jmx-password-file)", c.User, jmxPasswordEnv)
	}
	return c, nil
}

func cassandraRepair(ctx context.Context, stdio IO, o cassandraRepairOptions) error {
	log := cassandraLogger(stdio)
	local, err := o.Target.local(stdio)
	if err != nil {
		return err
	}
	targets, err := o.targets(local)
	if err != nil {
		return err
	}
	creds, err := o.credentials()
	if err != nil {
		return err
	}
	s, err := o.Target.session(ctx, local)
	if err != nil {
		return err
	}
	defer s.Close()
	nt, err := repair.NewJVMNodetool(ctx, repair.JVMOptions{Credentials: creds, SSLProperties: o.JMXSSL})
	if err != nil {
		return err
	}
	defer nt.Close()
	reg := prometheus.NewRegistry()
	r, err := repair.New(s, repair.NewStore(s, o.Target.stateKeyspace()), nt, targets, repair.Options{
		Keyspace: o.Target.Keyspace, Tables: o.Tables, Skip: o.Skip, Incremental: o.Incremental,
		Segments: o.Segments, Parallelism: o.Parallelism, Intensity: o.Intensity, SegmentTimeout: o.SegmentTimeout,
		MaxAttempts: o.Attempts, Backoff: o.Backoff, LeaseTTL: o.LeaseTTL, Logger: log,
		Metrics: repair.NewMetrics(reg, nil),
	})
	if err != nil {
		return err
	}
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", o.MetricsAddr, err)
		}
		srvCtx, stop := context.WithCancel(ctx)
		defer stop()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		go func() { _ = httpapi.Serve(srvCtx, ln, mux, 2*time.Second, log) }()
		log.Info("repair metrics on /metrics", "addr", ln.Addr().String())
	}
	run := func(ctx context.Context) error {
		res, err := r.Run(ctx)
		if err != nil {
			return err
		}
		verb := "repaired"
		if res.Resumed {
			verb = "resumed and repaired"
		}
		fmt.Fprintf(stdio.Out, "run %s: %s %s.{%s}: %d segments (%d now) in %s\n", res.Run, verb, o.Target.Keyspace,
			strings.Join(res.Tables, ","), res.Segments, res.Repaired, res.Took.Round(time.Second))
		return nil
	}
	if o.Schedule == "" {
		return run(ctx)
	}
	sched, _ := cron.ParseStandard(o.Schedule)
	if err := r.Observe(ctx); err != nil {
		log.Warn("repair metrics not read before the first run", "err", err)
	}
	log.Info("repair scheduled", "schedule", o.Schedule, "keyspace", o.Target.Keyspace, "holder", r.Holder())
	repair.Loop(ctx, sched, repair.RealClock{}, func(ctx context.Context, at time.Time) {
		if err := run(ctx); err != nil {
			var held *repair.LeaseHeldError
			if errors.As(err, &held) {
				log.Warn("scheduled repair skipped: another repairer runs", "at", at, "err", err)
				return
			}
			log.Error("scheduled repair failed", "at", at, "err", err)
		}
	})
	return nil
}
