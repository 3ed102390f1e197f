package launcher

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// waitHello polls member m until it answers hello, failing early if it exits.
func (s *Set) waitHello(ctx context.Context, m Member) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	for {
		if gone, how := s.exited(m); gone {
			return s.exitError(m, how)
		}
		if err := s.ping(ctx, m); err == nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("member %d (%s) did not answer within %s: %w; log: %s", m.Index, m.Host, s.opts.BootTimeout, err, m.LogPath())
		}
	}
}

func (s *Set) ping(ctx context.Context, m Member) error {
	conn, err := net.DialTimeout("tcp", m.Host, time.Second)
	if err != nil {
		return err
	}
	_ = conn.Close()
	return s.withMember(ctx, m.Index, func(c *mongo.Client) error {
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Err()
	})
}

// withMember runs fn with a client connected to member i alone, with no login: enough for
// hello and buildInfo, and for the localhost exception.
func (s *Set) withMember(ctx context.Context, i int, fn func(*mongo.Client) error) error {
	return s.withMemberAs(ctx, i, false, fn)
}

// withMemberAs is withMember, logged in with the keyFile's internal identity when internal, or
// as the user of login when one is given.
func (s *Set) withMemberAs(ctx context.Context, i int, internal bool, fn func(*mongo.Client) error, login ...options.Credential) error {
	o, err := s.opts.Security.clientOptions(s.MemberURI(i), internal)
	if err != nil {
		return err
	}
	for _, cred := range login {
		o.SetAuth(cred)
	}
	c, err := mongo.Connect(o.SetServerSelectionTimeout(2 * time.Second).SetConnectTimeout(2 * time.Second))
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Disconnect(dctx)
	}()
	return fn(c)
}

// MemberState is one member as replSetGetStatus reports it.
type MemberState struct {
	Index   int
	Host    string
	State   string // PRIMARY, SECONDARY, … or "DOWN" when its process is not running
	Healthy bool
	Version string
}

// Status asks each running member for its own state and version.
func (s *Set) Status(ctx context.Context) []MemberState {
	out := make([]MemberState, len(s.members))
	for i, m := range s.members {
		out[i] = MemberState{Index: i, Host: m.Host, State: "DOWN"}
		if _, ok := s.livePID(m); !ok {
			continue
		}
		_ = s.withMember(ctx, i, func(c *mongo.Client) error {
			var hello struct {
				Primary   bool `bson:"isWritablePrimary"`
				Secondary bool `bson:"secondary"`
				Arbiter   bool `bson:"arbiterOnly"`
			}
			var build struct {
				Version string `bson:"version"`
			}
			admin := c.Database("admin")
			if err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
				out[i].State = "UNREACHABLE"
				return err
			}
			_ = admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&build)
			out[i].Version, out[i].Healthy = build.Version, true
			switch {
			case hello.Primary:
				out[i].State = "PRIMARY"
			case hello.Secondary:
				out[i].State = "SECONDARY"
			default:
				out[i].State = "OTHER" // STARTUP2, RECOVERING, removed, …
			}
			return nil
		})
	}
	return out
}

// Primary returns the index of the member that is PRIMARY now, or -1.
func (s *Set) Primary(ctx context.Context) int {
	for _, st := range s.Status(ctx) {
		if st.State == "PRIMARY" {
			return st.Index
		}
	}
	return -1
}

// WaitPrimary waits until some running member is PRIMARY and returns its index.
func (s *Set) WaitPrimary(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	for {
		if p := s.Primary(ctx); p >= 0 {
			return p, nil
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return -1, fmt.Errorf("set %s: no PRIMARY within %s: %w", s.opts.Name, s.opts.BootTimeout, err)
		}
	}
}

// WaitHealthy waits until one running member is PRIMARY and every other running member is
// SECONDARY.
func (s *Set) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.BootTimeout)
	defer cancel()
	var last []MemberState
	for {
		last = s.Status(ctx)
		primaries, ok := 0, true
		for _, st := range last {
			switch st.State {
			case "PRIMARY":
				primaries++
			case "SECONDARY", "DOWN":
			default:
				ok = false
			}
		}
		if ok && primaries == 1 {
			return nil
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("set %s not healthy within %s: %v", s.opts.Name, s.opts.BootTimeout, last)
		}
	}
}
