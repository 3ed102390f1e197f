package dump

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/backup"
)

// killChildEnv tells the test binary to be the killed backup, and gives it "uri|db|out|ready":
// the source, the database, the backup directory and the file it creates once a collection is
// on disk (the moment the parent kills it).
const killChildEnv = "SHARDMART_DUMP_KILL_CHILD"

// TestKilledBackupHasNoManifestAndIsRefused SIGKILLs a backup process after its first
// collection is on disk: the directory has data files but no manifest, and a restore refuses
// it (ErrIncomplete) without creating anything.
func TestKilledBackupHasNoManifestAndIsRefused(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	db := freshDB("killed")
	for _, coll := range []string{"a", "b", "c"} {
		docs := make([]any, 500)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("x", 200)}}
		}
		if _, err := sourceClient.Database(db).Collection(coll).InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out, ready := filepath.Join(dir, "backup"), filepath.Join(dir, "ready")
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+strings.Join([]string{source.URI(), db, out, ready}, "|"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the backup process ended before its first collection was on disk: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	if _, err := os.Stat(filepath.Join(out, db, "a.bson")); err != nil {
		t.Errorf("the killed backup wrote no data file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, backup.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed backup has a manifest (stat: %v)", err)
	}
	into := freshDB("from_killed")
	if _, err := Restore(ctx, targetClient, RestoreOptions{Dir: out, Database: into}); !errors.Is(err, backup.ErrIncomplete) {
		t.Fatalf("restore of a killed backup: %v, want ErrIncomplete", err)
	}
	assertNoCollections(t, ctx, into)
}

// runKillChild is the killed backup: it backs up, and after the first collection it says so
// and waits to be killed.
func runKillChild() int {
	parts := strings.Split(os.Getenv(killChildEnv), "|")
	if len(parts) != 4 {
		fmt.Fprintf(os.Stderr, "%s: want uri|db|out|ready, got %q\n", killChildEnv, os.Getenv(killChildEnv))
		return 2
	}
	uri, db, out, ready := parts[0], parts[1], parts[2], parts[3]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = Backup(ctx, client, BackupOptions{Database: db, Out: out, afterCollection: func(string) {
		if err := os.WriteFile(ready, nil, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		<-ctx.Done() // killed before this
	}})
	fmt.Fprintf(os.Stderr, "backup was not killed: %v\n", err)
	return 1
}

// TestSnapshotTooOldNamesTheWindow reads at a cluster time older than the set's snapshot
// history window (lowered to 1 s): the backup fails with SnapshotTooOld and says what to do.
func TestSnapshotTooOldNamesTheWindow(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	admin := targetClient.Database("admin")
	setWindow := func(s int) error {
		return admin.RunCommand(context.WithoutCancel(ctx), bson.D{{Key: "setParameter", Value: 1}, {Key: "minSnapshotHistoryWindowInSeconds", Value: s}}).Err()
	}
	if err := setWindow(1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setWindow(300); err != nil {
			t.Errorf("restore minSnapshotHistoryWindowInSeconds: %v", err)
		}
	})
	db := targetClient.Database(freshDB("too_old"))
	t.Cleanup(func() { _ = db.Drop(context.WithoutCancel(ctx)) })
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	src, err := describe(ctx, targetClient)
	if err != nil {
		t.Fatal(err)
	}
	at := src.operationTime
	// The server discards history in the background: write on until a read at `at` fails.
	for n := 1; ; n++ {
		if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "n", Value: n}}); err != nil {
			t.Fatal(err)
		}
		_, err := Backup(ctx, targetClient, BackupOptions{Database: db.Name(), Out: filepath.Join(t.TempDir(), "b"), AtClusterTime: &at})
		if err == nil {
			if ctx.Err() != nil {
				t.Fatal("the read at an old cluster time kept working")
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		t.Logf("after %d writes: %v", n, err)
		for _, want := range []string{"SnapshotTooOld", "minSnapshotHistoryWindowInSeconds", "secondary or hidden member"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		return
	}
}
