package launcher

// The least-privilege users of shardmart's components, with the built-in roles each needs.
// docs/mongodb.md lists the same grants for production, and the tests that run each
// component with authorization enforced log in as these.

// ShopUser is serve's, seed's and migrate's login: readWrite on the shop's database. It
// creates the collections and indexes it lacks, runs transactions, reads and writes; migrate
// builds and drops its key indexes there. In a cluster it logs in through a mongos, whose
// users live on the config server; it has no login on the shards.
func ShopUser(name, password, db string) User {
	return User{Name: name, Password: password, Grants: []Grant{{Role: "readWrite", DB: db}}, In: ConfigServer}
}

// LagMonitorUser is the read-routing lag monitor's login on each replica set
// (serve --mongo-monitor-user): clusterMonitor for replSetGetStatus, and readWrite on
// shardmart_monitor for the heartbeat document it writes. In a cluster it logs in to each
// shard (it finds them through the shop's own connection), so it exists on the shards only.
func LagMonitorUser(name, password string) User {
	return User{Name: name, Password: password, Grants: []Grant{
		{Role: "clusterMonitor", DB: "admin"}, {Role: "readWrite", DB: heartbeatDatabase}}, In: ShardSets}
}

// heartbeatDatabase is readrouting.HeartbeatDatabase, spelled out: readrouting's live tests
// import this package. internal/store/mongostore's least-privilege test writes the heartbeat
// as LagMonitorUser, so the two cannot drift apart unnoticed.
const heartbeatDatabase = "shardmart_monitor"

// HotShardMonitorUser is `shardmart monitor`'s login: clusterMonitor alone, which also grants
// find on the config database's collections (config.shards, chunks, collections, changelog).
// It reads those on the config server and pings each shard, so it exists in every set.
func HotShardMonitorUser(name, password string) User {
	return User{Name: name, Password: password, Grants: []Grant{{Role: "clusterMonitor", DB: "admin"}}, In: ConfigServer | ShardSets}
}
