package launcher

import (
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Fixed ports per node address; every node binds its own 127.0.0.N so they can share them.
const (
	StoragePort = 7000
	CQLPort     = 9042
	// jmxPortBase + the last octet of the node address: local JMX always binds 127.0.0.1,
	// so JMX ports must differ across every node of every cluster on the machine.
	jmxPortBase = 7200
	// gidBase + the last octet is the group a node's JVM runs under (when started as root).
	// Cassandra 4+ opens peer connections without binding its own address, so only the
	// process's group (iptables -m owner --gid-owner) tells one node's outbound traffic from
	// another's: fault tests cut a single node off that way.
	gidBase = 47000
)

// Node is one member of the cluster; Index counts from 0 and node 0 is the seed.
type Node struct {
	Index   int
	Addr    string // listen, CQL and storage address
	JMXPort int
	Token   string
	Dir     string // conf/, data/, logs/, cassandra.pid
	// GID is the group id the node's JVM runs under, distinct per node of every cluster on the
	// machine; 0 when this process is not root (the JVM then keeps our group).
	GID int
	// DC is the node's data centre: datacenter1 in a one-DC cluster, else dc1, dc2, ...
	DC string
}

// ConfDir, DataDir and LogDir are the node's directories.
func (n Node) ConfDir() string { return filepath.Join(n.Dir, "conf") }
func (n Node) DataDir() string { return filepath.Join(n.Dir, "data") }
func (n Node) LogDir() string  { return filepath.Join(n.Dir, "logs") }

// SystemLog is the node's Cassandra log file.
func (n Node) SystemLog() string { return filepath.Join(n.LogDir(), "system.log") }

// HasData reports whether the node has booted before (its system keyspace is on disk): a
// restart, which the launcher runs as production does (restart.go), not as a fresh ring's boot.
func (n Node) HasData() bool {
	_, err := os.Stat(filepath.Join(n.DataDir(), "data", "system"))
	return err == nil
}

func (n Node) pidFile() string  { return filepath.Join(n.Dir, "cassandra.pid") }
func (n Node) yamlPath() string { return filepath.Join(n.ConfDir(), "cassandra.yaml") }

// layout derives the nodes: consecutive addresses from base, data centre after data centre
// (dcNodes[d] nodes in DC d+1), one evenly spaced Murmur3 token each within its DC, offset by
// the DC's index as ccm does so no two nodes share a token (num_tokens 1, no bootstrap:
// nothing to stream, nothing to wait for).
func layout(dir, base string, dcNodes []int) ([]Node, error) {
	addr, err := netip.ParseAddr(base)
	if err != nil || !addr.Is4() || !addr.IsLoopback() {
		return nil, fmt.Errorf("base address %q: want an IPv4 loopback address such as 127.0.0.1", base)
	}
	count := 0
	for _, n := range dcNodes {
		count += n
	}
	nodes := make([]Node, count)
	dc, inDC := 0, 0
	for i := range nodes {
		for inDC >= dcNodes[dc] {
			dc, inDC = dc+1, 0
		}
		last := addr.As4()[3]
		if last == 0 || int(last)+count-1 > 254 {
			return nil, fmt.Errorf("base address %s: %d nodes do not fit in the last octet", base, count)
		}
		nodes[i] = Node{
			Index:   i,
			Addr:    addr.String(),
			JMXPort: jmxPortBase + int(last),
			Token:   offset(token(inDC, dcNodes[dc]), dc),
			Dir:     filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			DC:      dcName(dc, len(dcNodes)),
		}
		inDC++
		if os.Geteuid() == 0 {
			nodes[i].GID = gidBase + int(last)
		}
		addr = addr.Next()
	}
	return nodes, nil
}

// dcName is data centre d's name: one DC keeps SimpleSnitch's datacenter1, so
// NetworkTopologyStrategy {'datacenter1': N} works on every local cluster.
func dcName(d, dcs int) string {
	if dcs == 1 {
		return "datacenter1"
	}
	return fmt.Sprintf("dc%d", d+1)
}

// offset adds d to a decimal token.
func offset(tok string, d int) string {
	t, _ := new(big.Int).SetString(tok, 10)
	return t.Add(t, big.NewInt(int64(d))).String()
}

// token is node i's Murmur3 token for an evenly split ring of n nodes: -2^63 + i*2^64/n.
func token(i, n int) string {
	span := new(big.Int).Lsh(big.NewInt(1), 64)
	t := new(big.Int).Mul(span, big.NewInt(int64(i)))
	t.Div(t, big.NewInt(int64(n)))
	t.Sub(t, new(big.Int).Lsh(big.NewInt(1), 63))
	return t.String()
}

// cassandraYAML renders a node's cassandra.yaml. 5.0 rejects unknown keys and uses the
// unit-suffixed names (max_hint_window: 3h).
func cassandraYAML(c *Cluster, n Node) string {
	d, z := n.DataDir(), c.opts.Sizing
	return fmt.Sprintf(`# Written by shardmart's launcher; rewritten on every start.
cluster_name: %q
num_tokens: 1
initial_token: "%s"
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
# Prefers the local replica when the coordinator is one, and with the dynamic snitch off a
# read at ONE pinned to a node reads that node's data: the fault tests rely on it.
endpoint_snitch: GossipingPropertyFileSnitch
dynamic_snitch: false
auto_bootstrap: false
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "%s"
listen_address: %s
rpc_address: %s
storage_port: %d
native_transport_port: %d
# Off on a restart: the launcher enables it once the node sees its peers up (restart.go).
start_native_transport: %t
data_file_directories:
  - %s
commitlog_directory: %s
saved_caches_directory: %s
hints_directory: %s
cdc_raw_directory: %s
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
hinted_handoff_enabled: true
max_hint_window: 3h
hints_flush_period: 1000ms
concurrent_compactors: 1
memtable_heap_space: %dMiB
memtable_offheap_space: %dMiB
concurrent_reads: %d
concurrent_writes: %d
concurrent_counter_writes: %d
native_transport_max_threads: %d
key_cache_size: 8MiB
auto_snapshot: false
# Loaded 2-core test machines: give replicas time before a write counts as failed.
write_request_timeout: 5000ms
read_request_timeout: 10000ms
range_request_timeout: 10000ms
request_timeout: 20000ms
`, c.opts.Name, n.Token, seeds(c), n.Addr, n.Addr, StoragePort, CQLPort, !n.HasData(),
		filepath.Join(d, "data"), filepath.Join(d, "commitlog"), filepath.Join(d, "saved_caches"),
		filepath.Join(d, "hints"), filepath.Join(d, "cdc_raw"),
		z.MemtableMiB, z.MemtableMiB, z.ConcurrentReads, z.ConcurrentWrites, z.ConcurrentWrites, z.TransportThreads,
	) + paxosYAML(c) + securityYAML(c)
}

// paxosYAML is the paxos_variant line when Options.PaxosVariant chooses one.
func paxosYAML(c *Cluster) string {
	if c.opts.PaxosVariant == "" {
		return ""
	}
	return "paxos_variant: " + c.opts.PaxosVariant + "\n"
}

// logbackXML keeps the server log at INFO in a file; without a config logback logs at DEBUG.
func logbackXML(n Node) string {
	return fmt.Sprintf(`<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>%s</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.FixedWindowRollingPolicy">
      <fileNamePattern>%s.%%i.zip</fileNamePattern><minIndex>1</minIndex><maxIndex>3</maxIndex>
    </rollingPolicy>
    <triggeringPolicy class="ch.qos.logback.core.rolling.SizeBasedTriggeringPolicy"><maxFileSize>20MB</maxFileSize></triggeringPolicy>
    <encoder><pattern>%%-5level [%%thread] %%date{ISO8601} %%F:%%L - %%msg%%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
`, n.SystemLog(), n.SystemLog())
}

const toolsLogbackXML = `<configuration scan="false">
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
`

// seeds are the first node of every data centre: each DC can gossip its way in on its own.
func seeds(c *Cluster) string {
	var s []string
	seen := map[string]bool{}
	for _, n := range c.nodes {
		if !seen[n.DC] {
			seen[n.DC] = true
			s = append(s, fmt.Sprintf("%s:%d", n.Addr, StoragePort))
		}
	}
	return strings.Join(s, ",")
}

// rackDC is the node's cassandra-rackdc.properties (GossipingPropertyFileSnitch).
func rackDC(n Node) string { return "dc=" + n.DC + "\nrack=rack1\n" }

// jvm17Options are what Cassandra 5.0's conf/jvm17-server.options and cassandra-env.sh pass;
// the jar does not carry those scripts.
var jvm17Options = []string{
	"-Djdk.attach.allowAttachSelf=true",
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.management/com.sun.jmx.remote.security=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.io=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	"--add-opens", "java.base/java.nio=ALL-UNNAMED",
	"-Dio.netty.tryReflectionSetAccessible=true",
	"-Djava.net.preferIPv4Stack=true",
	"-Dchronicle.analytics.disable=true",
	"-Xss256k",
}

// serverArgs is the java command line of node n.
func serverArgs(c *Cluster, n Node) []string {
	heap := fmt.Sprintf("%dm", c.opts.HeapMB)
	args := []string{
		"-Xms" + heap, "-Xmx" + heap,
		"-XX:+UseG1GC", "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1", fmt.Sprintf("-XX:MaxGCPauseMillis=%d", c.opts.Sizing.MaxGCPauseMillis),
		"-XX:+ExitOnOutOfMemoryError", "-XX:+PerfDisableSharedMem",
	}
	if c.opts.C1Only {
		args = append(args, "-XX:TieredStopAtLevel=1")
	}
	args = append(args, c.cdsArgs(c.cds.server, "server.lst")...)
	args = append(args, jvm17Options...)
	if !n.HasData() {
		args = append(args,
			// Test-cluster speedups (ccm does the same), for the first boot of a fresh ring only:
			// nothing to settle there. A node with data starts as in production: it waits for
			// gossip to settle, so it knows its peers' state before it coordinates anything.
			"-Dcassandra.skip_wait_for_gossip_to_settle=0",
			// Not ccm's 1000: a non-seed node gives its first gossip with the seed (the shadow round)
			// twice the ring delay and sends it again only every 5 s, so at 1 s a node starting on a
			// loaded machine died with "Unable to gossip with any peers" before the seed's answer
			// arrived. 5 s gives it 10 s and one resend; the round ends as soon as the seed answers,
			// and with auto_bootstrap: false nothing else at start waits for the ring delay.
			"-Dcassandra.ring_delay_ms=5000",
		)
	}
	args = append(args,
		"-javaagent:"+c.jamm,
		"-Dcassandra.config=file://"+n.yamlPath(),
		"-Dcassandra-foreground=yes",
		"-Dcassandra.storagedir="+n.DataDir(),
		"-Dcassandra.logdir="+n.LogDir(),
		"-Dlogback.configurationFile="+filepath.Join(n.ConfDir(), "logback.xml"),
		fmt.Sprintf("-Dcassandra.jmx.local.port=%d", n.JMXPort),
		"-Dcassandra.superuser_setup_delay_ms=0",
		// No fsync: a SIGKILLed JVM still leaves its writes in the page cache; only a machine
		// crash would lose them, which no test here simulates. Never -Dcassandra.unsafesystem:
		// it keeps the schema tables from being flushed, and the schema is loaded from SSTables
		// before the commit log replays, so a node killed with SIGKILL came back without its
		// tables and answered INCOMPATIBLE_SCHEMA.
		"-Dcassandra.skip_sync=true",
		// The conf dir last: class-data sharing needs the archive's jar list as the prefix.
		// No jar carries a cassandra-rackdc.properties or logback.xml that it could shadow.
		"-cp", c.cp+string(os.PathListSeparator)+n.ConfDir(),
		"org.apache.cassandra.service.CassandraDaemon",
	)
	return args
}

// writeNodeConfig (re)writes the node's config files and creates its directories.
func writeNodeConfig(c *Cluster, n Node) error {
	for _, d := range []string{n.ConfDir(), n.DataDir(), n.LogDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("node %d: %w", n.Index+1, err)
		}
	}
	files := map[string]string{
		"cassandra.yaml":              cassandraYAML(c, n),
		"logback.xml":                 logbackXML(n),
		"logback-tools.xml":           toolsLogbackXML,
		"cassandra-rackdc.properties": rackDC(n),
		"jvm-server.options":          "# For reading only: the launcher passes these.\n" + strings.Join(serverArgs(c, n), "\n") + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.ConfDir(), name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("node %d: %w", n.Index+1, err)
		}
	}
	return nil
}
