package mongocollect

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A shard whose primary answered the ping and then stops answering (cut off, frozen) leaves
// its queries hanging: onUpShards gives them half of what is left of the scrape and then
// counts the shard as down, so the collector succeeds before the scrape's deadline. A shard
// that answers with an error still fails the collector, and a down shard is not queried. The
// cut shard is logged by id, so a slow shard can be told from one that was down.
func TestOnUpShardsTreatsAHangingShardAsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	v := &view{shards: []shard{{id: "hangs", up: true}, {id: "down"}}}
	start := time.Now()
	var queried []string
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	err := onUpShards(ctx, logger, v, func(ctx context.Context, s shard) error {
		queried = append(queried, s.id)
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Errorf("a shard that stopped answering failed the collector: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second || ctx.Err() != nil {
		t.Errorf("onUpShards returned after %s (scrape deadline 4 s): want about half of it", took)
	}
	if len(queried) != 1 || queried[0] != "hangs" {
		t.Errorf("queried %v, want only the shard that is up", queried)
	}
	if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "shard=hangs") ||
		strings.Contains(out, "shard=down") {
		t.Errorf("log %q: want one warning naming shard hangs", out)
	}

	refused := errors.New("not authorized")
	err = onUpShards(ctx, logger, &view{shards: []shard{{id: "up", up: true}}}, func(context.Context, shard) error { return refused })
	if !errors.Is(err, refused) {
		t.Errorf("an error from a shard that answers: %v, want it to fail the collector", err)
	}
}
