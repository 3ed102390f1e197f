// Package faulttest proves, on a real 3-member MongoDB 6.0.5 replica set started by
// internal/mongodb/launcher, what the MongoDB store (internal/store/mongostore) promises across
// failovers: an order acknowledged at w: majority survives a SIGKILL of the primary, a client
// retrying with the same Idempotency-Key never gets two orders, stock and the outbox stay
// exactly in step with the stored orders, and a cart merge (CRT-5) or an order status change
// (ORD-3) caught by a replSetStepDown is applied once or not at all, never twice after a retry.
// The shop tests (shop_test.go) run steady traffic through the real HTTP API, every family on
// MongoDB, while the primary is frozen (SIGSTOP) or cut off (iptables and a cgroup of the
// test's own) for 15 s, record every request's start, end and answer, and check that no
// request answers 500 (the transient states answer 503 with Retry-After), that writes resume
// within the set's own failover time plus a margin, and that no acknowledged order is lost.
//
// One set for the whole package (TestMain, launcher.FaultTestPort, loopback only), with
// electionTimeoutMillis = 2 s instead of MongoDB's 10 s so that an election after a crash takes
// a few seconds and the package stays around two minutes on 2 cores. Every test starts from
// and returns the set to all members up with member 0 (priority 2) primary. Checks read the
// database directly from the primary at read concern majority, so nothing a failover could
// still roll back is counted. The package has only tests.
package faulttest
