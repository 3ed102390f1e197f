package dump

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// The package's two sets: the shop's 3-member set the backups are taken from, and a second,
// 1-member set the restores go to, as a restore onto new hardware would.
var (
	source, target             *launcher.Set
	sourceClient, targetClient *mongo.Client
)

func TestMain(m *testing.M) {
	// The killed-backup test's child: a backup to kill, not a test run (and not a second
	// owner of the sets' ports).
	if os.Getenv(killChildEnv) != "" {
		os.Exit(runKillChild())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	account.HashCost = bcrypt.MinCost
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := time.Now()
	src, stopSrc, err := launcher.StartShared(ctx, launcher.Options{Name: "shop", Members: 3, BasePort: launcher.BackupTestPort, Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the backup tests need a 3-member replica set on port %d: %v\n", launcher.BackupTestPort, err)
		return 1
	}
	defer stopSrc()
	dst, stopDst, err := launcher.StartShared(ctx, launcher.Options{Name: "restored", Members: 1, BasePort: launcher.BackupTestPort + 10, Logger: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the restore tests need a replica set on port %d: %v\n", launcher.BackupTestPort+10, err)
		return 1
	}
	defer stopDst()
	fmt.Fprintf(os.Stderr, "dump: sets up in %s (%s, %s)\n", time.Since(start).Round(100*time.Millisecond), src.URI(), dst.URI())
	source, target = src, dst
	for _, c := range []struct {
		uri string
		to  **mongo.Client
	}{{src.URI(), &sourceClient}, {dst.URI(), &targetClient}} {
		client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: connect %s: %v\n", c.uri, err)
			return 1
		}
		defer client.Disconnect(context.Background())
		*c.to = client
	}
	return m.Run()
}

// testContext is a test's context, cancelled at its end.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// freshDB names a database no test has used.
func freshDB(prefix string) string { return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()) }
