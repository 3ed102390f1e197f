package advise

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
)

// Orders as shardmart's own store writes them (order.Order's JSON form, one
// per line) are a valid sample: the advisor reads plain JSON as well as
// Extended JSON, and the items array only matters if it is the key.
func TestSampleFromShardmartOrders(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 400; i++ {
		o := order.Order{
			ID:        fmt.Sprintf("ord-%05d", i),
			UserID:    fmt.Sprintf("user-%03d", i%37),
			Zone:      []string{"eu", "us"}[i%2],
			Items:     []order.Item{{ProductID: "p1", Category: "books", Name: "Go", Quantity: 1, UnitPrice: money.MustParse("12.50")}},
			Total:     money.MustParse("12.50"),
			Status:    "paid",
			CreatedAt: t0.Add(time.Duration(i) * time.Minute),
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(filepath.Join(dir, "orders.jsonl"), []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	y := `shards: 2
chunk_size: 8KiB
ops: 800
collections:
  - name: orders
    sample: orders.jsonl
    operations:
      - {type: insert}
      - {name: history, type: find, filter: [user_id]}
    candidates:
      - {user_id: hashed}
      - {created_at: 1}
      - {items: 1}
`
	wf := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wf, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadWorkload(wf)
	if err == nil || !strings.Contains(err.Error(), "array in orders.jsonl:1") {
		t.Fatalf("key on items: got %v, want a refusal naming orders.jsonl:1", err)
	}
	if err := os.WriteFile(wf, []byte(strings.TrimSuffix(y, "      - {items: 1}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := LoadWorkload(wf)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Simulate(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if got := result(t, rs, "{user_id: hashed}").Characteristics.Distinct; got != 37 {
		t.Errorf("distinct user_id: got %d, want 37", got)
	}
	// created_at is an RFC 3339 string: it still ascends with insertion.
	if kc := result(t, rs, "{created_at: 1}").Characteristics; !kc.Monotonic {
		t.Errorf("created_at monotonicity: got r=%.2f, want monotonic", kc.Monotonicity)
	}
}
