#!/bin/sh
# Initiates the config server and shard replica sets (idempotent) and waits
# for each to elect a primary. Runs inside the mongo image (mongosh).
set -eu

initiate() { # host port config-json
	mongosh --quiet --host "$1" --port "$2" --eval "
		try { rs.status(); print('$1: replica set already initiated'); }
		catch (e) {
			if (e.codeName !== 'NotYetInitialized') { throw e; }
			rs.initiate($3);
			print('$1: initiated');
		}
		while (!db.hello().isWritablePrimary) { sleep(500); }
		print('$1: primary elected');
	"
}

initiate cfg-a 27019 '{_id: "cfg", configsvr: true, members: [{_id: 0, host: "cfg-a:27019"}]}'
initiate shard1-a 27018 '{_id: "shard1", members: [{_id: 0, host: "shard1-a:27018"}, {_id: 1, host: "shard1-b:27018"}, {_id: 2, host: "shard1-c:27018"}]}'
initiate shard2-a 27018 '{_id: "shard2", members: [{_id: 0, host: "shard2-a:27018"}, {_id: 1, host: "shard2-b:27018"}, {_id: 2, host: "shard2-c:27018"}]}'
