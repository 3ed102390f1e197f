#!/bin/sh
# Adds the three shard replica sets through mongos unless already present.
set -eu

mongosh --quiet --host mongos --port 27017 --eval '
	const have = db.adminCommand({ listShards: 1 }).shards.map(s => s._id);
	for (const [id, hosts] of [
		["shard1", "shard1/shard1-a:27018,shard1-b:27018,shard1-c:27018"],
		["shard2", "shard2/shard2-a:27018,shard2-b:27018,shard2-c:27018"],
		["shard3", "shard3/shard3-a:27018,shard3-b:27018,shard3-c:27018"],
	]) {
		if (have.includes(id)) { print(id + ": already a shard"); continue; }
		printjson(db.adminCommand({ addShard: hosts, name: id }));
	}
	printjson(db.adminCommand({ listShards: 1 }).shards.map(s => s._id + " " + s.host));
'
