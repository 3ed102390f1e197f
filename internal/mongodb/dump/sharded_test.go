package dump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
)

// TestShardsBackedUpAtOneClusterTimeAreOneCut runs the sharded procedure on the router-less
// cluster (a config server and two shards; no mongos exists here): balancer stopped, then
// each shard primary backed up at one cluster time. A writer chains inserts across the shards
// (a0, b0, a1, b1, ...: each only after the previous is acknowledged, its cluster time carried
// from one shard to the next as a mongos carries it); the cluster time is the smallest of the
// shard primaries' last applied times. The two backups together must hold exactly the links
// committed at or before it: never a later link without every earlier one.
func TestShardsBackedUpAtOneClusterTimeAreOneCut(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	c := launcher.ClusterForTest(t, launcher.ClusterOptions{Shards: 2, BasePort: launcher.BackupClusterTestPort})
	r, err := shardtest.Connect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	shardtest.BalancerOff(ctx, t, r)
	const db, coll = "xfer", "ledger"
	if err := r.ShardCollection(ctx, db+"."+coll, bson.D{{Key: "k", Value: "hashed"}}); err != nil {
		t.Fatal(err)
	}
	info, err := r.Collection(ctx, db+"."+coll)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Owners()) != 2 {
		t.Fatalf("the hashed collection's chunks are on %v, want both shards", info.Owners())
	}

	// The chain's links and the shard that owns each.
	const links = 4000
	ids := make([]any, links)
	for i := range ids {
		ids[i] = fmt.Sprintf("%c-%d", "ab"[i%2], i/2)
	}
	hashes, err := r.Hash(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	owners := make([]string, links)
	crossings := 0
	for i, h := range hashes {
		if owners[i], err = info.Owner(bson.D{{Key: "k", Value: h}}); err != nil {
			t.Fatal(err)
		}
		if i > 0 && owners[i] != owners[i-1] {
			crossings++
		}
	}
	sessions := map[string]*mongo.Session{}
	for id, cl := range r.Shards {
		s, err := cl.StartSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.EndSession(context.WithoutCancel(ctx))
		sessions[id] = s
	}

	var (
		mu      sync.Mutex
		gossip  bson.Raw         // the newest $clusterTime the writer has seen: what a mongos holds
		commits []bson.Timestamp // each link's operation time
	)
	writeCtx, stopWriter := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for i := 0; i < links && writeCtx.Err() == nil; i++ {
				s := sessions[owners[i]]
				mu.Lock()
				ct := gossip
				mu.Unlock()
				if ct != nil {
					if err := s.AdvanceClusterTime(ct); err != nil {
						return err
					}
				}
				_, err := r.Shards[owners[i]].Database(db).Collection(coll).InsertOne(mongo.NewSessionContext(writeCtx, s), bson.D{{Key: "_id", Value: ids[i]}, {Key: "k", Value: ids[i]}, {Key: "n", Value: i}})
				if err != nil {
					if writeCtx.Err() != nil {
						return nil
					}
					return err
				}
				mu.Lock()
				gossip, commits = s.ClusterTime(), append(commits, *s.OperationTime())
				mu.Unlock()
			}
			return nil
		}()
	}()
	waitWritten := func(n int) {
		t.Helper()
		for {
			mu.Lock()
			w := len(commits)
			mu.Unlock()
			if w >= n {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the writer stopped after %d links: %v", w, err)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitWritten(200)
	// The cluster time: the smallest of the shard primaries' last applied times, which every
	// shard can read at whatever its own clock says.
	var at bson.Timestamp
	for _, id := range r.ShardIDs() {
		src, err := describe(ctx, r.Shards[id])
		if err != nil {
			t.Fatal(err)
		}
		if at.IsZero() || src.operationTime.Compare(at) < 0 {
			at = src.operationTime
		}
	}
	mu.Lock()
	w0 := len(commits)
	mu.Unlock()
	waitWritten(w0 + 200) // links written after the cluster time, on both shards
	stopWriter()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Carried from shard to shard, the cluster time orders the chain: each link commits after
	// the one before it, whichever shard either is on. The backups must hold exactly the links
	// that committed at or before the cluster time.
	want := 0
	for i, c := range commits {
		if i > 0 && c.Compare(commits[i-1]) <= 0 {
			t.Fatalf("link %d committed at %s, not after link %d at %s: the cluster time was not carried", i, tsString(c), i-1, tsString(commits[i-1]))
		}
		if c.Compare(at) <= 0 {
			want = i + 1
		}
	}

	present := map[string]bool{}
	for _, id := range r.ShardIDs() {
		out := filepath.Join(t.TempDir(), id)
		m, err := Backup(ctx, r.Shards[id], BackupOptions{Database: db, Out: out, AtClusterTime: &at})
		if err != nil {
			t.Fatalf("backup of shard %s at %s: %v", id, tsString(at), err)
		}
		if m.Meta[MetaClusterTime] != tsString(at) {
			t.Errorf("shard %s backed up at %s, want %s", id, m.Meta[MetaClusterTime], tsString(at))
		}
		var keys map[string]bson.Raw
		if err := json.Unmarshal([]byte(m.Meta[MetaShardKeys]), &keys); err != nil || keys[coll] == nil {
			t.Errorf("shard %s: manifest shard keys %q, want %s's", id, m.Meta[MetaShardKeys], coll)
		}
		dir := filepath.Join(out, db)
		docs := readBSON(t, filepath.Join(dir, coll+".bson"))
		for _, d := range docs {
			present[d.Lookup("_id").StringValue()] = true
		}
		t.Logf("shard %s: %d links at cluster time %s", id, len(docs), tsString(at))
	}
	prefix := 0
	for prefix < links && present[ids[prefix].(string)] {
		prefix++
	}
	for i := prefix; i < links; i++ {
		if present[ids[i].(string)] {
			t.Errorf("link %s (written after %s, which is missing) is in the backups: not one cut", ids[i], ids[prefix])
		}
	}
	if prefix != want || want == 0 || want == len(commits) {
		t.Errorf("the backups hold the first %d links, want the %d of %d that committed at or before %s (some before, some after)", prefix, want, len(commits), tsString(at))
	}
	t.Logf("the two shard backups hold links 0..%d of the %d written (%d shard crossings in the whole chain)", prefix-1, len(commits), crossings)
}

// readBSON reads every document of a .bson file.
func readBSON(t *testing.T, path string) []bson.Raw {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []bson.Raw
	r := NewReader(f)
	for {
		d, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
}
