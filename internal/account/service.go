package account

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/validation"
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
	return s.create(ctx, email, hash)
}

// create stores a new user of a checked, normalised e-mail and a password hash.
func (s *Service) create(ctx context.Context, email, hash string) (User, error) {
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

// MaxRegisterMany bounds the users of one RegisterMany call.
const MaxRegisterMany = 500

// Registered is one user of RegisterMany: the account, whether this call created it, and
// with BulkRegistration.Sessions the token of a session started for it.
type Registered struct {
	User    User
	Created bool
	Token   string
}

// BulkRegistration is what RegisterMany creates: accounts for Emails, all with Password.
type BulkRegistration struct {
	Password string
	Emails   []string
	// Sessions starts a session for each user the call creates, as a login would, so a load
	// test needs no bcrypt comparison per user either. Never for an e-mail registered before
	// the call: the admin token must not become a way into someone's account.
	Sessions      bool
	IP, UserAgent string
}

// RegisterMany creates an account for each e-mail, all with one password hashed once: a load
// test's thousands of users cost one bcrypt hash instead of one each. The password and every
// e-mail are checked first, and a fault (named users.N.email) writes nothing. Then each user
// is decided on its own: an e-mail already registered is answered as it is (Created false,
// its password unchanged), so a repeated call creates nobody twice; a store error ends the
// call with the users before it written, and repeating the call completes it (their sessions,
// if asked for, are then not started again: they log in).
func (s *Service) RegisterMany(ctx context.Context, in BulkRegistration) ([]Registered, error) {
	password, emails := in.Password, in.Emails
	var c validation.Collector
	if len(emails) < 1 || len(emails) > MaxRegisterMany {
		c.Add("users", fmt.Sprintf("must list 1-%d users, got %d", MaxRegisterMany, len(emails)))
		return nil, c.Err()
	}
	checkPassword(&c, "password", password)
	normal := make([]string, len(emails))
	for i, e := range emails {
		normal[i] = NormalizeEmail(e)
		checkEmail(&c, fmt.Sprintf("users.%d.email", i), normal[i])
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	out := make([]Registered, len(normal))
	for i, email := range normal {
		u, err := s.create(ctx, email, hash)
		created := err == nil
		if errors.Is(err, ErrEmailTaken) {
			u, err = s.Users.UserByEmail(ctx, email)
		}
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", email, err)
		}
		out[i] = Registered{User: u, Created: created}
		if created && in.Sessions {
			if out[i].Token, _, err = s.Sessions.StartFor(ctx, u.ID, in.IP, in.UserAgent); err != nil {
				return nil, fmt.Errorf("start a session for %s: %w", email, err)
			}
		}
	}
	return out, nil
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
