// Package cassandracollect holds the Cassandra collectors of the hot-shard monitor:
// one prometheus collector per file, node_exporter style, each querying every node at scrape
// time under Options.Timeout. docs/monitor.md is the metric contract and says what each series
// reads on Cassandra 5.0.8.
//
// Every node gets its own gocql session whose host filter admits that node only, so the
// node-local virtual tables (system_views.*) answer for that node and no other. A node that
// does not answer is shardmart_cassandra_node_up{node}=0 and is left out of the other series:
// it is neither an error nor a crash. Sessions are opened lazily and reopened after a failure,
// so a node that comes back is seen on the next scrape.
package cassandracollect
