// Package account owns registered users: email plus a bcrypt password hash.
package account

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/validation"
)

var (
	ErrNotFound   = errors.New("user not found")
	ErrEmailTaken = errors.New("email already registered")
	// ErrBadCredentials is the one answer for unknown email and wrong password alike.
	ErrBadCredentials = errors.New("email or password is wrong")
)

// User is a registered account.
type User struct {
	ID           string
	Email        string
	PasswordHash string
	CreatedAt    time.Time
}

// Repository stores users; emails are unique (compared after NormalizeEmail).
type Repository interface {
	CreateUser(ctx context.Context, u User) error
	UserByEmail(ctx context.Context, email string) (User, error)
}

// NormalizeEmail lower-cases and trims an address so one person has one account.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// ValidateCredentials checks a registration request.
func ValidateCredentials(email, password string) error {
	var c validation.Collector
	a, err := mail.ParseAddress(email)
	c.Check(err == nil && a.Address == email && len(email) <= 254, "email", "must be a plain email address")
	// At least 8 characters (the OpenAPI minLength counts characters), at most 72 bytes: bcrypt
	// reads no further, and the document states this limit in bytes too.
	c.Check(utf8.RuneCountInString(password) >= 8 && len(password) <= 72, "password", "must be at least 8 characters and at most 72 bytes")
	return c.Err()
}

// HashCost is bcrypt's work factor; tests lower it to stay fast.
var HashCost = bcrypt.DefaultCost

// HashPassword returns the bcrypt hash of password.
func HashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), HashCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// dummyHash keeps unknown-email logins exactly as slow as wrong-password ones: it is hashed at
// HashCost, the cost of every real hash, once per cost (so it follows a changed HashCost).
// At bcrypt's minimum cost an unknown e-mail answered in 3-6 ms and a known one in 75-85 ms,
// which told an attacker which accounts exist.
func dummyHash() []byte {
	dummy.mu.Lock()
	defer dummy.mu.Unlock()
	if dummy.hash == nil || dummy.cost != HashCost {
		h, err := bcrypt.GenerateFromPassword([]byte("shardmart-timing-equaliser"), HashCost)
		if err != nil {
			panic(fmt.Sprintf("account: bcrypt at cost %d: %v", HashCost, err)) // HashCost out of bcrypt's range
		}
		dummy.hash, dummy.cost = h, HashCost
	}
	return dummy.hash
}

var dummy struct {
	mu   sync.Mutex
	cost int
	hash []byte
}

// compareHash is bcrypt's comparison; a test counts the calls through it.
var compareHash = bcrypt.CompareHashAndPassword

// Authenticate returns the user when email and password match. Every answer but a store error
// costs exactly one comparison at HashCost: against the dummy hash when the e-mail is unknown.
func Authenticate(ctx context.Context, repo Repository, email, password string) (User, error) {
	u, err := repo.UserByEmail(ctx, NormalizeEmail(email))
	hash := []byte(u.PasswordHash)
	switch {
	case errors.Is(err, ErrNotFound):
		hash = dummyHash()
	case err != nil:
		return User{}, err
	}
	match := compareHash(hash, []byte(password)) == nil
	if err != nil || !match {
		return User{}, ErrBadCredentials
	}
	return u, nil
}
