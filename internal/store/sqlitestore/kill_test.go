package sqlitestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
)

// writerEnv makes the test binary act as the writer process of TestSIGKILLLosesNoAcknowledgedOrder.
const writerEnv = "SHARDMART_SQLITE_KILL_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(runWriter(path))
	}
	os.Exit(m.Run())
}

const killStock = 1_000_000

// runWriter places orders as fast as it can and prints "ack <id>" after each commit returns,
// until it is killed.
func runWriter(path string) int {
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		id := fmt.Sprintf("o%07d", i)
		_, _, err := db.Orders().Place(ctx, order.Placement{OrderID: id, UserID: "u", CartID: "c" + id, CartOwner: "u:u",
			Zone: "eu", IdempotencyKey: id, Lines: []order.Line{{ProductID: "p", Category: "c", Quantity: 1}}, At: time.Now()})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(out, "ack", id)
		out.Flush()
	}
}

// TestSIGKILLLosesNoAcknowledgedOrder kills a writer process with SIGKILL in the middle of an
// order burst and reopens the file: every order whose commit was acknowledged is there, and
// stock and outbox agree with the orders present (WAL, synchronous=NORMAL: a process crash loses
// no committed transaction).
func TestSIGKILLLosesNoAcknowledgedOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kill.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Products().CreateProduct(ctx, catalog.Product{ID: "p", Name: "P", Category: "c",
		Price: money.MustParse("1.00"), Stock: map[string]int64{"eu": killStock}}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if id, ok := strings.CutPrefix(lines.Text(), "ack "); ok {
			acked = append(acked, id)
		}
		if len(acked) == 500 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if len(acked) < 500 {
		t.Fatalf("the writer acknowledged only %d orders before it stopped on its own", len(acked))
	}

	db, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer db.Close()
	for _, id := range acked {
		if _, err := db.Orders().GetOrder(ctx, id); err != nil {
			t.Fatalf("acknowledged order %s lost: %v", id, err)
		}
	}
	var present, messages int64
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&present); err != nil {
		t.Fatal(err)
	}
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE topic = 'order.placed'`).Scan(&messages); err != nil {
		t.Fatal(err)
	}
	p, err := db.Products().GetProduct(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if present < int64(len(acked)) || messages != present || p.Stock["eu"] != killStock-present {
		t.Errorf("after SIGKILL: %d acknowledged, %d orders present, %d outbox messages, stock %d; want present >= acknowledged, one message per order, stock %d",
			len(acked), present, messages, p.Stock["eu"], killStock-present)
	}
	t.Logf("%d orders acknowledged before SIGKILL, %d present after reopening", len(acked), present)
}
