// Package session owns sessions (SES-1): a bearer token per browser, anonymous until login,
// with a TTL after which the session is invisible at once and purged in the background.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"
)

var (
	ErrNotFound = errors.New("session not found or expired")
	// ErrBoundToOtherUser refuses to rebind a session that already belongs to someone else.
	ErrBoundToOtherUser = errors.New("session belongs to another user")
)

// DefaultTTL is seven days; 24 h, the shorter lifetime some
// shops want, is one flag away.
const DefaultTTL = 7 * 24 * time.Hour

// Status of a session.
type Status string

const (
	StatusActive Status = "active"
)

// Session is stored under ID, the SHA-256 of the bearer token, so a leaked table
// does not leak usable tokens.
type Session struct {
	ID         string
	UserID     string // empty while anonymous
	CreatedAt  time.Time
	LastActive time.Time
	ExpiresAt  time.Time
	IP         string
	UserAgent  string
	Status     Status
	Data       map[string]string
}

// Repository stores sessions.
type Repository interface {
	//dualwrite:write
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns ErrNotFound for a missing or expired (ExpiresAt <= now) session.
	//dualwrite:read
	GetSession(ctx context.Context, id string, now time.Time) (Session, error)
	// BindUser attaches userID to a live session; binding the same user again is a no-op,
	// another user gets ErrBoundToOtherUser.
	//dualwrite:write
	BindUser(ctx context.Context, id, userID string, now time.Time) (Session, error)
	// Touch records activity; it does not extend the expiry (a guest cart's TTL is tied to it).
	//dualwrite:write
	Touch(ctx context.Context, id string, now time.Time) error
	// Revoke ends a session at once (logout, and the guest session a login replaces): its
	// token no longer authenticates. Revoking a missing session is not an error.
	//dualwrite:write
	Revoke(ctx context.Context, id string) error
	//dualwrite:unmirrored
	PurgeExpired(ctx context.Context, now time.Time) (int, error)
}

// NewToken returns a fresh bearer token and the session ID derived from it.
func NewToken() (token, id string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, IDFromToken(token), nil
}

// IDFromToken derives the stored session ID from a bearer token.
func IDFromToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
