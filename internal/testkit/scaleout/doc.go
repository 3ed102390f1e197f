// Package scaleout holds the tests of one shop served by several API processes: three real
// `shardmart serve` OS processes on one real MongoDB replica set (every family on MongoDB), and
// three on a hybrid placement (orders on MongoDB; carts, sessions, history and the catalog on a
// real Cassandra node). The package has no code of its own.
package scaleout
