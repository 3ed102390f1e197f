// Package launcher runs a local Apache Cassandra 5.0 cluster from the server jars on Maven
// Central: 1 to 9 nodes on consecutive loopback addresses, for `shardmart cassandra up` and
// for tests. Nothing is mocked: these are real CassandraDaemon JVMs.
//
// Jars: EnsureJars writes a one-dependency pom (org.apache.cassandra:cassandra-all) and runs
// `mvn dependency:copy-dependencies` once into $SHARDMART_CACHE_DIR/cassandra-<version>/lib
// (default ~/.cache/shardmart), under a file lock. Java 17 and Maven must be on PATH; without
// them every entry point returns ErrPrerequisite naming the apt-get command.
//
// Class-data sharing: EnsureCDS (`shardmart cassandra fetch`, else the first prepare) boots a
// one-node training cluster on CDSTrainAddr once per machine and archives the classes the server
// and nodetool load (cds.go) into cassandra-<version>/cds-<java>/; every later JVM maps it
// (-Xshare:auto: a missing or stale archive costs speed only). SHARDMART_CASSANDRA_CDS=off
// starts without it.
//
// Tools: Nodetool runs nodetool against a node's JMX port, and NewSSTableLoader runs
// sstableloader (BulkLoader) for restores, both as JVMs on the cached jars.
//
// Nodes: node i listens on BaseAddr+i with the standard ports (storage 7000, CQL 9042) and JMX
// on 127.0.0.1:(7200 + last octet), one fixed token each, no bootstrap, small heaps, gossip
// settle and ring delay cut (see config.go). Each JVM is its own process group with a pidfile;
// Open(dir) finds a cluster another process started (cluster.json), so `down` works anywhere.
// StopNode drains with SIGTERM then SIGKILLs after a grace period; KillNode SIGKILLs at once.
// DownDir stops every node JVM with a pidfile under a directory, whichever cluster left it.
// Up refuses a directory whose cluster.json names another size or base address, and fails at
// once, with the node's ERROR lines, when a node exits while it waits.
//
// Tests and parallel packages: StartShared (TestMain) and ForTest (one test) start JVMs that
// die with the test process (PR_SET_PDEATHSIG) and SIGKILL them at the end, so a failing,
// panicking, timed-out or killed `go test` leaves no JVM. `go test ./...` runs packages in
// parallel, so each test cluster has its own base address, hence its own ports:
// ContractTestAddr (127.0.0.10, store contract tests, 1 node), FaultTestAddr (127.0.0.21-23,
// fault tests), LauncherTestAddr (127.0.0.31), MonitorTestAddr (127.0.0.41-42, the Cassandra
// collectors of the monitor), AlertingTestAddr (127.0.0.51-52, the end-to-end alert test), MigrateTestAddr
// (127.0.0.61, internal/migrate's backfill tests), RepairTestAddr (127.0.0.191-193, the
// repairer of internal/cassandra/repair), BackupSourceTestAddr (127.0.0.171-173),
// BackupRestore1TestAddr (127.0.0.175) and BackupRestore3TestAddr (127.0.0.181-183) (the
// backup and restore tests of internal/cassandra/snapshot), all
// apart from UserAddr (127.0.0.1-3) where a
// developer's `shardmart cassandra up` runs. Two test processes wanting the same base address
// (two `go test` runs at once) serialize on a lock file in $TMPDIR instead of clashing, and a
// node whose ports are taken by a foreign process fails with a message naming the address.
package launcher
