package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
)

// AdminTokenHeader carries the admin token. A separate header (not Authorization) keeps the
// bearer slot for the session, so an operator's browser session and admin rights never mix.
const AdminTokenHeader = "X-Admin-Token"

// caller is who sent the request: nil for public and admin routes.
type caller struct {
	sess session.Session
}

// owner is the cart (and event actor) the caller acts as: the user once logged in, else the session.
func (c *caller) owner() cart.Owner {
	if c.sess.UserID != "" {
		return cart.User(c.sess.UserID)
	}
	return cart.Guest(c.sess.ID)
}

// authenticate enforces a route's access level before its handler runs.
func (s *server) authenticate(r *http.Request, acc access) (*caller, error) {
	switch acc {
	case accAdmin:
		return nil, s.checkAdmin(r)
	case accSession, accUser:
		token, ok := bearer(r)
		if !ok {
			return nil, errUnauthenticated
		}
		sess, err := s.Sessions.Authenticate(r.Context(), token)
		if errors.Is(err, session.ErrNotFound) {
			return nil, errUnauthenticated
		}
		if err != nil {
			return nil, err
		}
		if acc == accUser && sess.UserID == "" {
			return nil, errLoginRequired
		}
		return &caller{sess: sess}, nil
	}
	return nil, nil
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// checkAdmin: missing token 401, wrong token 403, and 403 for everyone when none is configured.
func (s *server) checkAdmin(r *http.Request) error {
	got := r.Header.Get(AdminTokenHeader)
	switch {
	case s.AdminToken == "":
		return errAdminOff
	case got == "":
		return errAdminMissing
	case subtle.ConstantTimeCompare([]byte(got), []byte(s.AdminToken)) != 1:
		return errAdminWrong
	}
	return nil
}

type requestIDKey struct{}

// Request ids are a per-process random prefix plus a counter: unique, cheap, and greppable.
var (
	ridPrefix = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	ridSeq atomic.Uint64
)

func withRequestID(ctx context.Context) (context.Context, string) {
	id := ridPrefix + "-" + strconv.FormatUint(ridSeq.Add(1), 36)
	return context.WithValue(ctx, requestIDKey{}, id), id
}

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
