package account

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
)

// Sessions is what the account use cases need from sessions: a new session for a user, and
// ending one.
type Sessions interface {
	StartFor(ctx context.Context, userID, ip, userAgent string) (string, session.Session, error)
	Revoke(ctx context.Context, id string) error
}

// CartMerger moves a guest session's cart into a user's at login (CRT-5).
type CartMerger interface {
	Merge(ctx context.Context, sessionID, userID string) (cart.MergeResult, error)
}

// Service runs the account use cases: register, login (with the cart merge), logout.
type Service struct {
	Users    Repository
	Sessions Sessions
	Carts    CartMerger
	Now      func() time.Time
}

// Register creates an account; it does not log anyone in.
func (s *Service) Register(ctx context.Context, email, password string) (User, error) {
	email = NormalizeEmail(email)
	if err := ValidateCredentials(email, password); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return User{}, err
	}
	u := User{ID: id.String(), Email: email, PasswordHash: hash, CreatedAt: s.Now().UTC()}
	if err := s.Users.CreateUser(ctx, u); err != nil {
		return User{}, err
	}
	return u, nil
}

// Login is who logs in, from which session and where.
type Login struct {
	Caller          session.Session // the session the request came with
	Email, Password string
	IP, UserAgent   string
}

// LoginResult is the new session (its token is the only handle) and the merged cart.
type LoginResult struct {
	User    User
	Token   string
	Session session.Session
	Merge   cart.MergeResult
}

// Login authenticates, starts a NEW session bound to the user (a token planted before login
// is worthless: no session fixation), merges the caller's guest cart into the user's, and only
// then revokes the caller's session. A failure up to and including that revoke leaves the old
// token working, so the login can simply be repeated: Merge with nothing left to merge changes
// nothing, and the failed attempt's new session is revoked (or expires on its own).
func (s *Service) Login(ctx context.Context, in Login) (LoginResult, error) {
	u, err := Authenticate(ctx, s.Users, in.Email, in.Password)
	if err != nil {
		return LoginResult{}, err
	}
	if in.Caller.UserID != "" && in.Caller.UserID != u.ID {
		return LoginResult{}, session.ErrBoundToOtherUser
	}
	token, sess, err := s.Sessions.StartFor(ctx, u.ID, in.IP, in.UserAgent)
	if err != nil {
		return LoginResult{}, err
	}
	merged, err := s.Carts.Merge(ctx, in.Caller.ID, u.ID)
	if err != nil {
		return LoginResult{}, s.dropUnused(ctx, sess.ID, err)
	}
	if err := s.Sessions.Revoke(ctx, in.Caller.ID); err != nil {
		return LoginResult{}, s.dropUnused(ctx, sess.ID, err)
	}
	return LoginResult{User: u, Token: token, Session: sess, Merge: merged}, nil
}

// dropUnused revokes the session a failed login started: its token was never handed out, and
// the client repeats the login with its old token, which still works.
func (s *Service) dropUnused(ctx context.Context, id string, err error) error {
	if rerr := s.Sessions.Revoke(context.WithoutCancel(ctx), id); rerr != nil {
		return fmt.Errorf("%w (and the unused new session stays until it expires: %v)", err, rerr)
	}
	return err
}

// Logout ends the caller's session at once.
func (s *Service) Logout(ctx context.Context, sessionID string) error {
	return s.Sessions.Revoke(ctx, sessionID)
}
