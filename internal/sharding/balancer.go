package sharding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BalancerStatus is the reply of balancerStatus.
type BalancerStatus struct {
	Mode              string `bson:"mode"` // "full" or "off"
	InBalancerRound   bool   `bson:"inBalancerRound"`
	NumBalancerRounds int64  `bson:"numBalancerRounds"`
}

// Enabled reports whether the balancer thread is on.
func (s BalancerStatus) Enabled() bool { return s.Mode != "off" }

func (s BalancerStatus) String() string {
	return fmt.Sprintf("mode=%s inBalancerRound=%t numBalancerRounds=%d", s.Mode, s.InBalancerRound, s.NumBalancerRounds)
}

// GetBalancerStatus runs balancerStatus.
func GetBalancerStatus(ctx context.Context, a Admin) (BalancerStatus, error) {
	raw, err := a.RunCommand(ctx, "admin", BalancerStatusCmd())
	if err != nil {
		return BalancerStatus{}, err
	}
	var st BalancerStatus
	if err := bson.Unmarshal(raw, &st); err != nil {
		return BalancerStatus{}, fmt.Errorf("decode balancerStatus: %w", err)
	}
	return st, nil
}

// StartBalancer runs balancerStart.
func StartBalancer(ctx context.Context, a Admin) error {
	_, err := a.RunCommand(ctx, "admin", BalancerStartCmd())
	return err
}

// ErrBalancerBusy means a balancing round was still running when the wait ended.
var ErrBalancerBusy = errors.New("balancer still in a balancing round")

// StopBalancer runs balancerStop, then polls balancerStatus until no balancing
// round (and so no balancer chunk move) is running, printing progress: a round
// can outlive balancerStop ("inBalancerRound can be true when mode is off").
// It replaces the chapter's `while (sh.isBalancerRunning())` loop, which in
// mongosh never ends: that helper returns a document, always truthy.
func StopBalancer(ctx context.Context, a Admin, wait, poll time.Duration, out io.Writer) (BalancerStatus, error) {
	// The Go driver turns a context deadline into the command's maxTimeMS, and the server
	// refuses a command that also carries its own ("duplicate field", found on a real config
	// server): the wait goes in the context, not in the document.
	stopCtx, cancel := context.WithTimeout(ctx, wait)
	_, err := a.RunCommand(stopCtx, "admin", BalancerStopCmd(0))
	cancel()
	if err != nil {
		return BalancerStatus{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		st, err := GetBalancerStatus(ctx, a)
		if err != nil {
			return st, err
		}
		if !st.InBalancerRound {
			fmt.Fprintf(out, "balancer stopped: %s\n", st)
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("%w after %s: %s", ErrBalancerBusy, wait, st)
		}
		fmt.Fprintf(out, "waiting for the balancing round to finish: %s\n", st)
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// AutoSplit is what shardmart can say about auto-splitting for a server.
type AutoSplit struct {
	Version string
	// NoOp: 6.0.3+ never auto-splits; the balancer splits by data size.
	NoOp bool
	// Enabled is config.settings' autosplit flag (servers before 6.0.3).
	Enabled bool
	Note    string
}

// GetAutoSplit reports auto-split per server version (buildInfo): a no-op
// since 6.0.3, else the config.settings {_id: "autosplit"} flag (default on).
func GetAutoSplit(ctx context.Context, a Admin) (AutoSplit, error) {
	version, err := serverVersion(ctx, a)
	if err != nil {
		return AutoSplit{}, err
	}
	as := AutoSplit{Version: version}
	if VersionAtLeast(version, 6, 0, 3) {
		as.NoOp = true
		as.Note = "auto-split is a no-op since MongoDB 6.0.3: the balancer splits and moves ranges by data size (sh.enableAutoSplit() does nothing)"
		return as, nil
	}
	docs, err := a.Find(ctx, "config", "settings", bson.D{{Key: "_id", Value: "autosplit"}})
	if err != nil {
		return as, err
	}
	as.Enabled = true // the documented default when no settings document exists
	if len(docs) > 0 {
		var s struct {
			Enabled *bool `bson:"enabled"`
		}
		if err := bson.Unmarshal(docs[0], &s); err != nil {
			return as, fmt.Errorf("decode config.settings autosplit: %w", err)
		}
		if s.Enabled != nil {
			as.Enabled = *s.Enabled
		}
	}
	as.Note = "auto-split is controlled by config.settings {_id: \"autosplit\"} on servers before 6.0.3 (balancerStart also enables it there)"
	return as, nil
}

// VersionAtLeast compares a "major.minor.patch[-suffix]" server version.
func VersionAtLeast(v string, major, minor, patch int) bool {
	v, _, _ = strings.Cut(v, "-")
	parts := strings.SplitN(v, ".", 3)
	nums := [3]int{}
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return false
		}
		nums[i] = n
	}
	want := [3]int{major, minor, patch}
	for i := range nums {
		if nums[i] != want[i] {
			return nums[i] > want[i]
		}
	}
	return true
}
