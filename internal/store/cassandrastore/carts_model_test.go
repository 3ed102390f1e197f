package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// Histories of one cart, recorded from several shop processes at once (each with its own
// memory of active carts, so reads by exact key and their fallbacks meet every change another
// process makes) on a 3-node cluster with RF 3, all nodes up and then with one node stopped,
// and checked for linearizability against cartModel: every answered read is the cart as the
// acknowledged changes left it, a checkout's frozen lines hold every edit acknowledged before
// it and no refused one (so a removed line is never charged), an edit is refused only while
// a checkout holds the cart, and a checkout that fails gives the cart back as it froze it (a
// refused edit written into the frozen cart never reappears in it).
func TestCartHistoriesLinearizableOnThreeNodes(t *testing.T) {
	c := launcher.ForTest(t, launcher.Options{Nodes: 3, BaseAddr: launcher.CartModelTestAddr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ks := fmt.Sprintf("cartmodel_%d", time.Now().UnixNano()%1e6)
	if _, err := ApplySchema(ctx, c.Hosts(), SchemaOptions{Keyspace: ks, RF: 3}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	st, err := Open(ctx, Config{Hosts: c.Hosts(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Run("all nodes up", func(t *testing.T) { checkCartHistories(t, st) })
	if err := c.StopNode(ctx, 2); err != nil {
		t.Fatalf("stop node 3: %v", err)
	}
	t.Run("node 3 stopped", func(t *testing.T) { checkCartHistories(t, st) })
}

const (
	cartModelOwners  = 3 // carts recorded at once, each its own history
	cartModelEditors = 3 // processes editing and reading each cart
	cartModelOrders  = 4 // checkouts per cart: a history ends after them
	// cartModelLimit bounds a history's recording: a machine short of CPU slows every
	// operation, so histories end on a count of checkouts rather than after a fixed time.
	cartModelLimit = 60 * time.Second
)

// checkCartHistories records cartModelOwners histories and checks each.
func checkCartHistories(t *testing.T, st *Store) {
	prefix := rid("model")
	var wg sync.WaitGroup
	hists := make([][]porcupine.Operation, cartModelOwners)
	for o := range hists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hists[o] = recordCart(st, cart.User(fmt.Sprintf("%s-%d", prefix, o)), time.Now().Add(cartModelLimit))
		}()
	}
	wg.Wait()
	var refused, frozen, released, ops int
	for o, hist := range hists {
		ops += len(hist)
		for _, op := range hist {
			out := op.Output.(cartOut)
			switch in := op.Input.(cartIn); {
			case in.kind == cartEdit && out.kind == outRefused:
				refused++
			case in.kind == cartFreeze && out.kind == outOK:
				frozen++
			case in.kind == cartRelease && out.kind == outOK:
				released++
			}
		}
		res, info := porcupine.CheckOperationsVerbose(cartModel(), hist, time.Minute)
		if res != porcupine.Ok {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("cart-history-%s-%d.html", prefix, o))
			if err := porcupine.VisualizePath(cartModel(), info, path); err != nil {
				t.Logf("visualize: %v", err)
			}
			t.Errorf("cart %d: history of %d operations is %v (visualization: %s)", o, len(hist), res, path)
		}
	}
	// The check means something only if edits met checkouts, and failed checkouts gave carts back.
	if frozen < cartModelOwners || refused == 0 || released == 0 {
		t.Errorf("%d checkouts froze a cart, %d failed and gave it back, and %d edits were refused by one: the workload did not race them", frozen, released, refused)
	}
	t.Logf("%d histories of %d operations checked: %d checkouts froze a cart, %d gave it back, %d edits refused during one", len(hists), ops, frozen, released, refused)
}

type cartOpKind int

const (
	cartEdit    cartOpKind = iota // PutItem (qty > 0) or RemoveItem (qty 0)
	cartGet                       // ActiveCart
	cartFreeze                    // BeginCheckout
	cartOrder                     // MarkOrdered of the cart the freeze returned
	cartRelease                   // EndCheckout of a checkout that failed: the cart is given back
)

// cartModelProducts is how many products the histories edit, p0 to p3: few, so edits of
// one line meet.
const cartModelProducts = 4

// cartLines are a cart's quantities of p0..p3 (0: no line).
type cartLines [cartModelProducts]int64

func linesOf(c cart.Cart) cartLines {
	var l cartLines
	for _, it := range c.Items {
		var p int
		if _, err := fmt.Sscanf(it.ProductID, "p%d", &p); err == nil && p >= 0 && p < cartModelProducts {
			l[p] = it.Quantity
		}
	}
	return l
}

type cartIn struct {
	kind    cartOpKind
	product int
	qty     int64 // an edit's; 0 removes the line
}

type outKind int

const (
	outOK       outKind = iota
	outRefused          // ErrCheckoutInProgress (or a stale checkout)
	outNotFound         // no active cart
	outUnknown          // any other error: the change may or may not have happened
)

type cartOut struct {
	kind   outKind
	lines  cartLines // ActiveCart's and BeginCheckout's
	frozen bool      // ActiveCart's: a checkout holds the cart
}

func readOut(c cart.Cart, err error) cartOut {
	out := outOf(err)
	out.lines, out.frozen = linesOf(c), c.CheckoutOrder != ""
	return out
}

func outOf(err error) cartOut {
	var stale *cart.StaleCheckoutError
	switch {
	case err == nil:
		return cartOut{kind: outOK}
	case errors.Is(err, cart.ErrCheckoutInProgress), errors.As(err, &stale):
		return cartOut{kind: outRefused}
	case errors.Is(err, cart.ErrNotFound):
		return cartOut{kind: outNotFound}
	}
	return cartOut{kind: outUnknown}
}

// recordCart runs cartModelEditors editing processes and one checkout process on owner's cart
// until the checkout process has ordered cartModelOrders carts (or end), and returns what each
// call asked and answered, with its start and end.
func recordCart(st *Store, owner cart.Owner, end time.Time) []porcupine.Operation {
	var (
		mu   sync.Mutex
		hist []porcupine.Operation
		wg   sync.WaitGroup
	)
	call := func(client int, in cartIn, f func() cartOut) cartOut {
		start := time.Now().UnixNano()
		out := f()
		mu.Lock()
		hist = append(hist, porcupine.Operation{ClientId: client, Input: in, Call: start, Output: out, Return: time.Now().UnixNano()})
		mu.Unlock()
		return out
	}
	ctx := context.Background()
	checkoutsDone := make(chan struct{})
	running := func() bool {
		select {
		case <-checkoutsDone:
			return false
		default:
			return time.Now().Before(end)
		}
	}
	for client := 0; client < cartModelEditors; client++ {
		r := otherProcess(st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running() {
				n := rand.IntN(cartModelProducts)
				p := fmt.Sprintf("p%d", n)
				switch k := rand.IntN(10); {
				case k < 3:
					call(client, cartIn{kind: cartGet}, func() cartOut {
						return readOut(r.ActiveCart(ctx, owner, time.Now()))
					})
				case k < 5:
					call(client, cartIn{kind: cartEdit, product: n}, func() cartOut {
						_, err := r.RemoveItem(ctx, owner, p, time.Now())
						return outOf(err)
					})
				default:
					q := int64(1 + rand.IntN(3))
					call(client, cartIn{kind: cartEdit, product: n, qty: q}, func() cartOut {
						_, err := r.PutItem(ctx, owner, cart.Item{ProductID: p, Category: "c", Quantity: q}, time.Time{}, time.Now())
						return outOf(err)
					})
				}
			}
		}()
	}
	// The checkout process: every 50-150 ms it freezes the cart and, 20 ms later (the order
	// being placed), orders it, as the checkout service does: a freeze whose answer was lost
	// is looked up (a read, recorded too), and ordering is repeated until it is answered. One
	// checkout in three fails instead: the cart is given back (EndCheckout, repeated until
	// answered), and edits refused while it was frozen must not reappear in it.
	r := otherProcess(st)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(checkoutsDone)
		client := cartModelEditors
		for n, ordered := 0, 0; ordered < cartModelOrders && time.Now().Before(end); n++ {
			time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond) // the shopper's pace
			orderID := fmt.Sprintf("o%d", n)
			var frozen cart.Cart
			out := call(client, cartIn{kind: cartFreeze}, func() cartOut {
				now := time.Now()
				var err error
				frozen, err = r.BeginCheckout(ctx, owner, orderID, now.Add(time.Minute), now)
				out := outOf(err)
				out.lines = linesOf(frozen)
				return out
			})
			if out.kind == outUnknown || out.kind == outRefused {
				// Frozen by this process only: by this freeze or an earlier one whose answer was lost.
				out = call(client, cartIn{kind: cartGet}, func() cartOut {
					var err error
					frozen, err = r.ActiveCart(ctx, owner, time.Now())
					return readOut(frozen, err)
				})
				if !out.frozen {
					continue
				}
				orderID = frozen.CheckoutOrder
			}
			if out.kind != outOK {
				continue
			}
			time.Sleep(20 * time.Millisecond) // the order placed in the order store
			if rand.IntN(3) == 0 {
				for time.Now().Before(end) {
					if out := call(client, cartIn{kind: cartRelease}, func() cartOut {
						return outOf(r.EndCheckout(ctx, owner, frozen.ID, orderID, time.Now()))
					}); out.kind == outOK {
						break
					}
				}
				continue
			}
			for time.Now().Before(end) {
				if out := call(client, cartIn{kind: cartOrder}, func() cartOut {
					return outOf(r.MarkOrdered(ctx, owner, frozen.ID, orderID, time.Now()))
				}); out.kind == outOK {
					ordered++
					break
				}
			}
		}
	}()
	wg.Wait()
	return withOpenUnknowns(hist)
}

// withOpenUnknowns keeps every call whose outcome is unknown open to the end of the history:
// such a change may take effect after its call returned (a timed-out Paxos round is completed
// by the next round on the partition, a timed-out write still reaches replicas), so its only
// real-time bound is its start.
func withOpenUnknowns(hist []porcupine.Operation) []porcupine.Operation {
	var last int64
	for _, op := range hist {
		last = max(last, op.Return)
	}
	for i, op := range hist {
		if op.Output.(cartOut).kind == outUnknown {
			hist[i].Return = last + 1
		}
	}
	return hist
}

// cartModelState is the model's state: the cart's lines and whether a checkout holds it.
type cartModelState struct {
	lines  cartLines
	frozen bool
}

// cartModel is one owner's active cart. An edit applies unless a checkout holds the cart, and
// is refused only then; a read answers the lines and whether a checkout holds the cart; a
// freeze answers the lines and holds the cart (a second one is refused); ordering it leaves no
// cart (the next put starts an empty one), and ordering again changes nothing. An unknown
// outcome may or may not have taken effect.
func cartModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{cartModelState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(cartModelState), input.(cartIn), output.(cartOut)
			switch in.kind {
			case cartEdit:
				next := cartModelState{lines: s.lines}
				next.lines[in.product] = in.qty
				switch {
				case out.kind == outUnknown && !s.frozen:
					return []any{s, next}
				case out.kind == outUnknown, out.kind == outRefused && s.frozen:
					return []any{s}
				case out.kind == outOK && !s.frozen:
					return []any{next}
				case out.kind == outNotFound && !s.frozen && next.lines == s.lines:
					return []any{s} // removing a line of no cart
				}
			case cartGet:
				switch {
				case out.kind == outUnknown,
					out.kind == outOK && out.lines == s.lines && out.frozen == s.frozen,
					out.kind == outNotFound && s.lines == cartLines{} && !s.frozen:
					return []any{s}
				}
			case cartFreeze:
				frozen := cartModelState{lines: s.lines, frozen: true}
				switch {
				case out.kind == outUnknown && !s.frozen:
					return []any{s, frozen}
				case out.kind == outOK && !s.frozen && out.lines == s.lines:
					return []any{frozen}
				case out.kind == outNotFound && !s.frozen && s.lines == cartLines{},
					out.kind == outRefused && s.frozen:
					return []any{s}
				}
			case cartRelease:
				switch {
				case out.kind == outUnknown:
					return []any{s, cartModelState{lines: s.lines}}
				case out.kind == outOK: // given back, or a repeat whose first answer was lost
					return []any{cartModelState{lines: s.lines}}
				}
			case cartOrder:
				switch {
				case out.kind == outUnknown:
					return []any{s, cartModelState{}}
				case out.kind == outOK && s.frozen:
					return []any{cartModelState{}}
				case out.kind == outOK: // a repeat of an order whose answer was lost
					return []any{s}
				}
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(cartModelState) == b.(cartModelState) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(cartIn), output.(cartOut)
			what := [...]string{"edit", "get", "freeze", "order", "give back"}[in.kind]
			if in.kind == cartEdit {
				what = fmt.Sprintf("put p%d=%d", in.product, in.qty)
				if in.qty == 0 {
					what = fmt.Sprintf("remove p%d", in.product)
				}
			}
			return fmt.Sprintf("%s → %s %v", what, [...]string{"ok", "refused", "not found", "unknown"}[out.kind], out.lines)
		},
		DescribeState: func(state any) string {
			s := state.(cartModelState)
			if s.frozen {
				return fmt.Sprintf("frozen: %v", s.lines)
			}
			return fmt.Sprint(s.lines)
		},
	}
	return m.ToModel()
}
