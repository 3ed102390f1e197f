package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/cart"
	storepkg "github.com/shardmart/shardmart/internal/store"
)

// A partition the loop's rounds read and propose against: proposals answer with the outcomes
// listed (nil: applied; errRefused: the condition was false; any other error: as the driver
// would return it), and an outcome may have applied even when it reports an error.
type fakePartition struct {
	value    int
	outcomes []error
	landed   []bool // the proposal applied despite its outcome
	reads    []gocql.Consistency
	readErr  error // returned by reads after the first proposal
	proposed int
}

var (
	errRefused = errors.New("refused")
	errInvalid = &gocql.RequestErrInvalid{}
)

func (f *fakePartition) round(want int) casRound[int] {
	return func(ctx context.Context, a casAttempt) (int, *casOp[int], error) {
		f.reads = append(f.reads, a.cl)
		if a.n > 0 && f.readErr != nil {
			return 0, nil, f.readErr
		}
		if f.value == want {
			return f.value, nil, nil // done: our change (or an equal one) is there
		}
		return 0, &casOp[int]{applied: func() int { return want }, exec: func(context.Context) (bool, error) {
			i := f.proposed
			f.proposed++
			out := f.outcomes[i]
			if out == nil || (i < len(f.landed) && f.landed[i]) {
				f.value = want
			}
			if out == errRefused {
				return false, nil
			}
			return out == nil, out
		}}, nil
	}
}

func TestCASLoop(t *testing.T) {
	timeout := gocql.ErrTimeoutNoResponse
	for _, tc := range []struct {
		name      string
		f         fakePartition
		wantErr   error // nil: success
		unknown   bool  // the error is ErrOutcomeUnknown
		proposals int
		reads     []gocql.Consistency
	}{
		{name: "applied at once", f: fakePartition{outcomes: []error{nil}}, proposals: 1,
			reads: []gocql.Consistency{gocql.Quorum}},
		{name: "timed out but landed: the SERIAL read sees it, no second proposal", f: fakePartition{outcomes: []error{timeout}, landed: []bool{true}},
			proposals: 1, reads: []gocql.Consistency{gocql.Quorum, gocql.Serial}},
		{name: "timed out and did not land: proposed again", f: fakePartition{outcomes: []error{timeout, nil}},
			proposals: 2, reads: []gocql.Consistency{gocql.Quorum, gocql.Serial}},
		{name: "refused, then applied", f: fakePartition{outcomes: []error{errRefused, nil}},
			proposals: 2, reads: []gocql.Consistency{gocql.Quorum, gocql.Serial}},
		{name: "timed out, and the read that would settle it fails", f: fakePartition{outcomes: []error{timeout}, readErr: fmt.Errorf("read: %w", &gocql.RequestErrReadTimeout{})},
			wantErr: ErrOutcomeUnknown, unknown: true, proposals: 1},
		{name: "a refused statement is an error, not an unknown outcome", f: fakePartition{outcomes: []error{errInvalid}},
			wantErr: errInvalid, proposals: 1},
		{name: "a decision after an unknown outcome stands", f: fakePartition{outcomes: []error{timeout}, readErr: cart.ErrCheckoutInProgress},
			wantErr: cart.ErrCheckoutInProgress, proposals: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			p := &policy{metrics: newClientMetrics(reg, nil)}
			got, err := casLoop(context.Background(), p, "test", tc.f.round(7))
			switch {
			case tc.wantErr == nil && (err != nil || got != 7):
				t.Fatalf("got %d, %v; want 7, nil", got, err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("got %d, nil; want an error like %v", got, tc.wantErr)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, ErrOutcomeUnknown) != tc.unknown {
				t.Errorf("errors.Is(%v, ErrOutcomeUnknown) = %v, want %v", err, !tc.unknown, tc.unknown)
			}
			if tc.unknown && !errors.Is(Unavailable(err), storepkg.ErrUnavailable) {
				t.Errorf("%v: not reported unavailable (503)", err)
			}
			if tc.f.proposed != tc.proposals {
				t.Errorf("%d proposals, want %d", tc.f.proposed, tc.proposals)
			}
			if tc.reads != nil && fmt.Sprint(tc.f.reads) != fmt.Sprint(tc.reads) {
				t.Errorf("reads at %v, want %v", tc.f.reads, tc.reads)
			}
		})
	}
}

// Contention that never ends stops after maxCASAttempts with a 503, not an unknown outcome.
func TestCASLoopContended(t *testing.T) {
	f := fakePartition{}
	for i := 0; i < maxCASAttempts; i++ {
		f.outcomes = append(f.outcomes, errRefused)
	}
	_, err := casLoop(context.Background(), nil, "put item", f.round(7))
	var ce *casError
	if !errors.As(err, &ce) || errors.Is(err, ErrOutcomeUnknown) || !errors.Is(Unavailable(err), storepkg.ErrUnavailable) || f.proposed != maxCASAttempts {
		t.Fatalf("got %v after %d proposals; want a contended casError after %d", err, f.proposed, maxCASAttempts)
	}
}

// Unknown outcomes are counted.
func TestCASLoopCountsUnknown(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := &policy{metrics: newClientMetrics(reg, nil)}
	f := fakePartition{outcomes: []error{gocql.ErrTimeoutNoResponse, gocql.ErrConnectionClosed, nil}}
	if _, err := casLoop(context.Background(), p, "test", f.round(7)); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(p.metrics.casUnknown); got != 2 {
		t.Errorf("cas_unknown_total %v, want 2", got)
	}
}
