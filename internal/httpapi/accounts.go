package httpapi

import (
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/validation"
)

type sessionResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// startSession creates a guest session. The stored session id (a hash of the token) is never
// returned: the token is the only handle a client holds.
func (s *server) startSession(w http.ResponseWriter, r *http.Request, _ *caller) error {
	if err := s.limitSessions(r); err != nil {
		return err
	}
	token, sess, err := s.Sessions.Start(r.Context(), clientIP(r), r.UserAgent())
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
	if err := s.limitRegister(r); err != nil {
		return err
	}
	u, err := s.Accounts.Register(r.Context(), in.Email, in.Password)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/users/"+u.ID)
	return reply(w, http.StatusCreated, userResponse{ID: u.ID, Email: u.Email})
}

type loginResponse struct {
	// Token is the session's new bearer token: login never promotes the token the client
	// had (session fixation), which stops working.
	Token     string       `json:"token"`
	User      userResponse `json:"user"`
	ExpiresAt time.Time    `json:"expires_at"`
	Cart      cartView     `json:"cart"`
	// NotMerged lists the guest lines (or the part of a quantity) the user's cart had no room
	// for (CRT-5): the user is told, not silently short-changed.
	NotMerged []mergeLeftover `json:"not_merged"`
}

type mergeLeftover struct {
	ProductID string `json:"product_id"`
	Quantity  int64  `json:"quantity"`
}

// login is account.Service.Login (a new token, the guest cart merged, the old token revoked)
// behind the shape check and the rate limits.
func (s *server) login(w http.ResponseWriter, r *http.Request, c *caller, in *credentials) error {
	if err := checkLoginShape(in); err != nil {
		return err
	}
	if err := s.limitLogin(r, in.Email); err != nil {
		return err
	}
	res, err := s.Accounts.Login(r.Context(), account.Login{Caller: c.sess, Email: in.Email, Password: in.Password,
		IP: clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	view, err := s.viewCart(r.Context(), res.Merge.Cart)
	if err != nil {
		return err
	}
	left := make([]mergeLeftover, len(res.Merge.NotMerged))
	for i, it := range res.Merge.NotMerged {
		left[i] = mergeLeftover{ProductID: it.ProductID, Quantity: it.Quantity}
	}
	return reply(w, http.StatusOK, loginResponse{Token: res.Token, User: userResponse{ID: res.User.ID, Email: res.User.Email},
		ExpiresAt: res.Session.ExpiresAt, Cart: view, NotMerged: left})
}

// logout revokes the caller's token: it stops working at once.
func (s *server) logout(w http.ResponseWriter, r *http.Request, c *caller) error {
	if err := s.Accounts.Logout(r.Context(), c.sess.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// clientIP is the connection's peer address: behind a proxy, the proxy's (no forwarded
// header is trusted, since any client can send one).
func clientIP(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return ip
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

type bulkUsersRequest struct {
	Password string          `json:"password"`
	Users    []bulkUserInput `json:"users"`
	Sessions bool            `json:"sessions"`
}

type bulkUserInput struct {
	Email string `json:"email"`
}

type bulkUserResult struct {
	userResponse
	Created bool   `json:"created"`
	Token   string `json:"token,omitempty"`
}

// bulkUsers creates many users with one password (account.Service.RegisterMany): `bench`
// provisions thousands this way on a server started with --admin-bulk-users.
func (s *server) bulkUsers(w http.ResponseWriter, r *http.Request, _ *caller, in *bulkUsersRequest) error {
	if !s.BulkUsers {
		return problem(http.StatusNotFound, "bulk-users-off", "Bulk user creation is off",
			"start the server with --admin-bulk-users to create users in bulk")
	}
	emails := make([]string, len(in.Users))
	for i, u := range in.Users {
		emails[i] = u.Email
	}
	done, err := s.Accounts.RegisterMany(r.Context(), account.BulkRegistration{Password: in.Password, Emails: emails,
		Sessions: in.Sessions, IP: clientIP(r), UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	out := make([]bulkUserResult, len(done))
	for i, d := range done {
		out[i] = bulkUserResult{userResponse{ID: d.User.ID, Email: d.User.Email}, d.Created, d.Token}
	}
	return reply(w, http.StatusOK, map[string]any{"users": out})
}
