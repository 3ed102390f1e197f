// Package twodc proves, on a real Cassandra 5.0 cluster of two data centres started by the
// launcher with a login required over TLS (dc1: 3 nodes, dc2: 1 node), that a shop in each DC,
// connected with its local DC, serves its own users' carts, sessions and history; that cut
// apart (iptables, internal/testkit/faultnet) each DC keeps serving at LOCAL_QUORUM while a shop whose
// quorums span the DCs answers 503; that after the heal every acknowledged write is on every
// node (hints, then repair), counted; and that LOCAL_QUORUM serves with a node of dc1 down. It
// also checks the one-line errors of a refused login, a missing grant, an untrusted
// certificate and an unknown DC. It has only tests; see docs/cassandra.md and
// docs/production.md.
package twodc
