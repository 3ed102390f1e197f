package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/session"
)

// sessionStarter starts a session bound to a user and answers its bearer token.
type sessionStarter interface {
	StartFor(ctx context.Context, userID, ip, userAgent string) (string, session.Session, error)
}

// provisionWorkers bounds the provisioning writes in flight: enough to hide a replicated
// store's round trips, few enough not to queue deep behind SQLite's single writer.
const provisionWorkers = 16

// storeProvisioner creates the bench's users straight in the in-process server's stores, all
// with one bcrypt hash of the password computed once, and a session for each: the API would
// hash twice per user (register, then log in), minutes of server CPU for thousands of users.
// The users are what registration writes (account.Service.Register), so logins through the
// API work for them as for anyone.
func storeProvisioner(users account.Repository, sessions sessionStarter) loadgen.Provisioner {
	return func(ctx context.Context, emails []string, password string) ([]string, error) {
		hash, err := account.HashPassword(password)
		if err != nil {
			return nil, fmt.Errorf("hash the bench password: %w", err)
		}
		tokens := make([]string, len(emails))
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(provisionWorkers)
		for i, email := range emails {
			g.Go(func() error {
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				u := account.User{ID: id.String(), Email: account.NormalizeEmail(email), PasswordHash: hash, CreatedAt: time.Now().UTC()}
				if err := users.CreateUser(ctx, u); err != nil {
					return fmt.Errorf("create user %s: %w", email, err)
				}
				if tokens[i], _, err = sessions.StartFor(ctx, u.ID, "127.0.0.1", "shardmart-bench"); err != nil {
					return fmt.Errorf("start a session for %s: %w", email, err)
				}
				return nil
			})
		}
		return tokens, g.Wait()
	}
}

// databaseProcesses are the database processes whose CPU bench reports: pids given, and
// those named by the pidfiles under each dir (cassandra.pid, mongod.pid: what `cassandra
// up` and `mongo up` write for each node or member).
func databaseProcesses(pids []int, dirs []string) ([]loadgen.Process, error) {
	var out []loadgen.Process
	for _, pid := range pids {
		out = append(out, loadgen.Process{Name: "database", PID: pid})
	}
	for _, dir := range dirs {
		found := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (d.Name() != "cassandra.pid" && d.Name() != "mongod.pid") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return fmt.Errorf("pidfile %s: %w", path, err)
			}
			found++
			out = append(out, loadgen.Process{Name: strings.TrimSuffix(d.Name(), ".pid") + " " + filepath.Base(filepath.Dir(path)), PID: pid})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("--db-dir %s: %w", dir, err)
		}
		if found == 0 {
			return nil, fmt.Errorf("--db-dir %s: no cassandra.pid or mongod.pid under it (the directory given to cassandra up or mongo up)", dir)
		}
	}
	return out, nil
}

// cpuSummary is a step line's CPU per request, one figure per process.
func cpuSummary(cpu []loadgen.CPUUse) string {
	var b strings.Builder
	for _, c := range cpu {
		if c.Error == "" {
			fmt.Fprintf(&b, ", CPU/req %s %.2f ms", c.Name, c.PerRequestMS)
		}
	}
	return b.String()
}
