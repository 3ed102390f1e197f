// Package faulttest proves, on a real 3-node Cassandra 5.0 cluster started by the launcher,
// the integrity mechanisms the Cassandra placement relies on (CAS-1): hinted handoff, read
// repair, availability at ONE, scheduled anti-entropy repair, and that no write acknowledged
// at QUORUM is lost when a node is SIGKILLed. Its sick-node tests run steady shop traffic
// while one node is frozen, cut off from its peers (internal/testkit/faultnet) or killed and
// restarted, and bound the stall the shop sees. It has only tests; see docs/cassandra.md and
// docs/evidence/robustness.md.
package faulttest
