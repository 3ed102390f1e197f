package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/account"
)

// errNoBulkRoute: the server answers 404 at POST /v1/admin/users (serve without
// --admin-bulk-users, or a server without the route).
var errNoBulkRoute = errors.New("the server has no bulk user route on (serve --admin-bulk-users)")

// userWorkers bounds the provisioning requests in flight; each login is a bcrypt comparison
// on the server, which a few in flight keep busy on every core.
const userWorkers = 4

// bulkRegister creates the users through the admin bulk route, account.MaxRegisterMany per
// call (the server hashes the password once per call), each with a session the route starts;
// a user it did not create (registered by an earlier run) logs in.
func (s *Shop) bulkRegister(ctx context.Context) error {
	start := time.Now()
	s.users = make([]*user, s.cfg.Users)
	for i := range s.users {
		s.users[i] = &user{email: s.email(i), password: BenchPassword}
	}
	for from := 0; from < len(s.users); from += account.MaxRegisterMany {
		batch := s.users[from:min(from+account.MaxRegisterMany, len(s.users))]
		if err := s.createUsers(ctx, batch); err != nil {
			return err
		}
		fmt.Fprintf(s.cfg.Log, "created %d/%d users through the bulk route\n", from+len(batch), len(s.users))
	}
	var login []*user // registered before this run: the route starts no session for them
	for _, u := range s.users {
		if u.token == "" {
			login = append(login, u)
		}
	}
	err := s.eachUser(ctx, login, "logged in", func(u *user) error {
		tok, err := s.newSession(ctx)
		if err == nil {
			u.token, err = s.login(ctx, tok, u)
		}
		return err
	})
	if err == nil {
		fmt.Fprintf(s.cfg.Log, "provisioned %d users with sessions in %s\n", len(s.users), time.Since(start).Round(time.Millisecond))
	}
	return err
}

// createUsers sends one bulk call; an e-mail registered already counts as created, so a
// repeated run's batch goes through.
func (s *Shop) createUsers(ctx context.Context, batch []*user) error {
	in := struct {
		Password string              `json:"password"`
		Users    []map[string]string `json:"users"`
		Sessions bool                `json:"sessions"`
	}{Password: BenchPassword, Sessions: true}
	for _, u := range batch {
		in.Users = append(in.Users, map[string]string{"email": u.email})
	}
	st, b, err := s.call(ctx, "POST", "/v1/admin/users", "", in, "X-Admin-Token", s.cfg.AdminToken)
	switch {
	case err == nil && st == http.StatusNotFound:
		return errNoBulkRoute
	case err != nil || st != http.StatusOK:
		return fmt.Errorf("create users: %s", describe("POST /v1/admin/users", st, b, err))
	}
	var out struct{ Users []struct{ ID, Token string } }
	if err := json.Unmarshal(b, &out); err != nil || len(out.Users) != len(batch) {
		return fmt.Errorf("create users: %d asked, answered %.300s (%v)", len(batch), b, err)
	}
	for i, u := range batch {
		u.token = out.Users[i].Token
	}
	return nil
}

// eachUser runs fn for each of users, userWorkers at a time, and reports progress every tenth.
func (s *Shop) eachUser(ctx context.Context, users []*user, done string, fn func(u *user) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(userWorkers)
	step := max(len(users)/10, 1)
	var n atomic.Int64
	for _, u := range users {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := fn(u); err != nil {
				return err
			}
			if k := int(n.Add(1)); k%step == 0 || k == len(users) {
				fmt.Fprintf(s.cfg.Log, "%s %d/%d users\n", done, k, len(users))
			}
			return nil
		})
	}
	return g.Wait()
}
