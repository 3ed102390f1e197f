#!/bin/sh
# Initiates the config server and the three shard replica sets, then waits
# until each set has a PRIMARY: any member, not a named one (after a restart
# another member may win the election, and waiting for member -a would hang).
# Idempotent: a set that any member reports as initiated is not initiated
# again, "AlreadyInitialized" is success, and a set initiated by an older
# version of this script gets member 0's priority raised to 2 (reconfig on the
# primary). Member 0 has priority 2 so the same member is primary after a
# restart. Runs inside the mongo image (mongosh); RS_INIT_TIMEOUT_S bounds the
# wait per set (default 180 s), after which it fails instead of hanging.
set -eu

TIMEOUT_S=${RS_INIT_TIMEOUT_S:-180}

# The JavaScript run for each set; CONFIG (the replSetInitiate document) and
# TIMEOUT_S are defined before it. It talks to every member directly and
# calls no shell API inside Array callbacks (mongosh does not await there).
RS_INIT_JS=$(cat <<'EOF'
const setName = CONFIG._id;
const hosts = [];
for (const m of CONFIG.members) { hosts.push(m.host); }
const deadline = Date.now() + TIMEOUT_S * 1000;
const conns = {};

function say(msg) { print(setName + ': ' + msg); }

// run sends doc to host's admin database, directly (no discovery), and
// returns the reply; a thrown error becomes an ok: 0 reply.
function run(host, doc) {
	try {
		if (!conns[host]) {
			conns[host] = new Mongo('mongodb://' + host + '/?directConnection=true&serverSelectionTimeoutMS=2000');
		}
		// Assign before returning: mongosh awaits the call here, inside
		// the try; "return call()" would let its error escape the catch.
		const reply = conns[host].getDB('admin').runCommand(doc);
		return reply;
	} catch (e) {
		delete conns[host];
		return { ok: 0, code: e.code, codeName: e.codeName || 'Unreachable', errmsg: String(e.message || e) };
	}
}

function waitOrFail(what) {
	if (Date.now() > deadline) {
		say('gave up after ' + TIMEOUT_S + ' s waiting for ' + what);
		quit(1);
	}
	sleep(500);
}

// initiated: true when any member reports the set initiated, false when
// member 0 answers NotYetInitialized and no member reports it initiated.
function initiated() {
	for (;;) {
		let first = null;
		for (const h of hosts) {
			const r = run(h, { replSetGetStatus: 1 });
			if (r.ok) { return true; }
			if (h === hosts[0]) { first = r; }
		}
		if (first && first.codeName === 'NotYetInitialized') { return false; }
		waitOrFail('member ' + hosts[0] + ' to answer (' + (first ? first.codeName + ': ' + first.errmsg : 'no reply') + ')');
	}
}

// anyPrimary returns the name of the member in PRIMARY state (1), as any
// reachable member sees it.
function anyPrimary() {
	for (;;) {
		for (const h of hosts) {
			const r = run(h, { replSetGetStatus: 1 });
			if (!r.ok) { continue; }
			for (const m of r.members) {
				if (m.state === 1) { return m.name; }
			}
		}
		waitOrFail('a PRIMARY');
	}
}

if (initiated()) {
	say('replica set already initiated');
} else {
	for (;;) {
		const r = run(hosts[0], { replSetInitiate: CONFIG });
		if (r.ok) { say('initiated'); break; }
		if (r.codeName === 'AlreadyInitialized') { say('replica set already initiated'); break; }
		say('replSetInitiate: ' + r.codeName + ': ' + r.errmsg);
		waitOrFail('replSetInitiate to succeed');
	}
}

let primary = anyPrimary();
// Member 0 must have priority 2 (a set initiated by an older script may not).
for (;;) {
	const got = run(primary, { replSetGetConfig: 1 });
	if (got.ok) {
		const cfg = got.config;
		let m0 = null;
		for (const m of cfg.members) {
			if (m._id === CONFIG.members[0]._id) { m0 = m; }
		}
		if (m0 === null || m0.priority === 2) { break; }
		m0.priority = 2;
		cfg.version = cfg.version + 1;
		const r = run(primary, { replSetReconfig: cfg });
		if (r.ok) { say('member ' + m0.host + ' priority set to 2'); break; }
		say('replSetReconfig: ' + r.codeName + ': ' + r.errmsg);
	}
	waitOrFail('the config on primary ' + primary);
	primary = anyPrimary();
}
primary = anyPrimary();
say('primary is ' + primary);
EOF
)

# initiate CONFIG: the replSetInitiate document of one set (JavaScript).
initiate() {
	mongosh --nodb --quiet --eval "const CONFIG = $1; const TIMEOUT_S = $TIMEOUT_S;
$RS_INIT_JS"
}

initiate '{_id: "cfg", configsvr: true, members: [{_id: 0, host: "cfg-a:27019", priority: 2}]}'
initiate '{_id: "shard1", members: [{_id: 0, host: "shard1-a:27018", priority: 2}, {_id: 1, host: "shard1-b:27018"}, {_id: 2, host: "shard1-c:27018"}]}'
initiate '{_id: "shard2", members: [{_id: 0, host: "shard2-a:27018", priority: 2}, {_id: 1, host: "shard2-b:27018"}, {_id: 2, host: "shard2-c:27018"}]}'
initiate '{_id: "shard3", members: [{_id: 0, host: "shard3-a:27018", priority: 2}, {_id: 1, host: "shard3-b:27018"}, {_id: 2, host: "shard3-c:27018"}]}'
