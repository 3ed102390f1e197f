package httpapi

import (
	"errors"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/validation"
)

type sessionResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// startSession creates a guest session. The stored session id (a hash of the token) is never
// returned: the token is the only handle a client holds.
func (s *server) startSession(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	token, sess, err := s.Sessions.Start(r.Context(), ip, r.UserAgent())
	if err != nil {
		return err
	}
	return reply(w, http.StatusCreated, sessionResponse{Token: token, ExpiresAt: sess.ExpiresAt})
}

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type userResponse struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// register creates an account; it does not log the session in.
func (s *server) register(w http.ResponseWriter, r *http.Request, _ *caller, in *credentials) error {
	email := account.NormalizeEmail(in.Email)
	if err := account.ValidateCredentials(email, in.Password); err != nil {
		return err
	}
	hash, err := account.HashPassword(in.Password)
	if err != nil {
		return err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	u := account.User{ID: id.String(), Email: email, PasswordHash: hash, CreatedAt: s.Now().UTC()}
	if err := s.Stores.Users.CreateUser(r.Context(), u); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/users/"+u.ID)
	return reply(w, http.StatusCreated, userResponse{ID: u.ID, Email: u.Email})
}

type loginResponse struct {
	User      userResponse `json:"user"`
	ExpiresAt time.Time    `json:"expires_at"`
	Cart      cartView     `json:"cart"`
}

// login binds the caller's session to the user and merges the guest cart into the user's
// (CRT-5). The session is bound first: a merge then only ever goes to the session's own user,
// and a failed merge is finished by repeating the login (binding again is a no-op, and Merge
// with nothing left to merge changes nothing).
func (s *server) login(w http.ResponseWriter, r *http.Request, c *caller, in *credentials) error {
	ctx := r.Context()
	if err := checkLoginShape(in); err != nil {
		return err
	}
	u, err := account.Authenticate(ctx, s.Stores.Users, in.Email, in.Password)
	if err != nil {
		return err
	}
	if c.sess.UserID != "" && c.sess.UserID != u.ID {
		return session.ErrBoundToOtherUser
	}
	now := s.Now().UTC()
	sess, err := s.Stores.Sessions.BindUser(ctx, c.sess.ID, u.ID, now)
	if err != nil {
		return err
	}
	if _, err := s.Stores.Carts.Merge(ctx, c.sess.ID, u.ID, now); err != nil && !errors.Is(err, cart.ErrNotFound) {
		return err
	}
	view, err := s.cartView(ctx, cart.User(u.ID))
	if err != nil {
		return err
	}
	return reply(w, http.StatusOK, loginResponse{User: userResponse{ID: u.ID, Email: u.Email}, ExpiresAt: sess.ExpiresAt, Cart: view})
}

// checkLoginShape refuses what the OpenAPI LoginCredentials schema refuses (a missing or
// over-long email or password) with a 400 naming the field. Everything else is Authenticate's
// to judge, so a wrong email and a wrong password still get the same 401.
func checkLoginShape(in *credentials) error {
	var c validation.Collector
	n := utf8.RuneCountInString(in.Email)
	c.Check(n >= 1 && n <= 254, "email", "must be 1-254 characters")
	n = utf8.RuneCountInString(in.Password)
	c.Check(n >= 1 && n <= 72, "password", "must be 1-72 characters")
	return c.Err()
}
