// Package faulttest proves, on a real 3-member MongoDB 6.0.5 replica set started by
// internal/mongodb/launcher, what the MongoDB store (internal/store/mongostore) promises across
// failovers: an order acknowledged at w: majority survives a SIGKILL of the primary, a client
// retrying with the same Idempotency-Key never gets two orders, stock and the outbox stay
// exactly in step with the stored orders, and a cart merge (CRT-5) or an order status change
// (ORD-3) caught by a replSetStepDown is applied once or not at all, never twice after a retry.
//
// One set for the whole package (TestMain, launcher.FaultTestPort, loopback only), with
// electionTimeoutMillis = 2 s instead of MongoDB's 10 s so that an election after a crash takes
// a few seconds and the package stays around two minutes on 2 cores. Every test starts from
// and returns the set to all members up with member 0 (priority 2) primary. Checks read the
// database directly from the primary at read concern majority, so nothing a failover could
// still roll back is counted. The package has only tests.
package faulttest
