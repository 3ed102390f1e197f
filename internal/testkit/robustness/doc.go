// Package robustness checks the shop's consistency claims the way Jepsen and etcd's
// robustness tests do: clients drive the shop's real services while a nemesis injects a fault
// (kill -9 and restart, SIGSTOP/SIGCONT, a primary stepdown, iptables partitions: one member
// from everyone, a primary from its peers only, a bridge; a secondary made to lag), every
// operation is recorded with its call and return time, its input and its output — or "unknown"
// when a timeout or a lost connection leaves its outcome open — and the recorded history is
// checked afterwards: per key against a porcupine model for linearizability (the stock
// counter, an order's status, a product's price), as a set (every acknowledged order and cart
// line is present after the heal, nothing refused is), and, for reads the read table lets lag,
// against their 5 s or 10 s staleness budget.
//
// Targets: real 3-member MongoDB replica sets (internal/mongodb/launcher, loopback only), one
// for the process nemeses (launcher.RobustnessTestPort, TestMongoDB) and one for the network
// nemeses (launcher.RobustnessPartitionTestPort, TestMongoDBPartitions), and the embedded SQLite
// store without one; a real 3-node Cassandra cluster (internal/cassandra/launcher,
// launcher.RobustnessTestAddr) holding carts, sessions and history under kill, pause, isolation
// of one node and a bridge (cassandra_test.go), each partition counted only once `nodetool
// status` agrees (a peer sees the isolated node down; across the bridge, the node in between
// sees both ends up); the router-less sharded MongoDB cluster
// with the balancer migrating chunks while the donor shard's primary is cut off
// (sharded_test.go).
//
// A failing linearizability check writes porcupine's HTML visualisation of the history into
// $SHARDMART_ROBUSTNESS_OUT, or a fresh temporary directory, and names it in the test log. An
// "unknown" check result (the checker timed out) fails the test: it is never a pass.
//
// Traffic runs before the fault, during it and for a recovery period after the heal; a run
// fails unless writes were acknowledged in each of the three phases and, for the MongoDB
// nemeses that take the primary away (kill, pause, partition, deposed), some client saw the
// fault — a run whose nemesis changed nothing proves nothing. The stepdown, the bridge and the
// secondary nemeses leave a primary serving, so there only the phases count.
//
// SHARDMART_ROBUSTNESS_DURATION (default 8s: a quarter of it before the fault, half of it at
// least for the fault, which is held until the shop took orders inside it),
// SHARDMART_ROBUSTNESS_REPEAT (default 1: runs per workload × nemesis pair) and
// SHARDMART_ROBUSTNESS_SEED (default: the time) make the longer run of every target, the
// sharded one included (its cut lasts half the duration, 10 s at least); docs/evidence/robustness.md
// has the command. The targets' top-level tests run at once (TestMain raises -test.parallel
// to their number unless it is given). The package has only tests.
package robustness
