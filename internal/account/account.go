// Package account owns registered users: email plus a bcrypt password hash.
package account

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"runtime"
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
	checkEmail(&c, "email", email)
	checkPassword(&c, "password", password)
	return c.Err()
}

// checkEmail records a fault under field unless email is a plain address.
func checkEmail(c *validation.Collector, field, email string) {
	a, err := mail.ParseAddress(email)
	c.Check(err == nil && a.Address == email && mailbox(email), field, "must be a plain email address")
}

// checkPassword records a fault under field unless the password is 8 to 72 characters, as the
// OpenAPI document's minLength and maxLength count them; a password over bcrypt's 72 bytes is
// pre-hashed (bcryptInput), so bytes do not matter.
func checkPassword(c *validation.Collector, field, password string) {
	n := utf8.RuneCountInString(password)
	c.Check(n >= 8 && n <= MaxPasswordChars, field, "must be 8-72 characters")
}

// mailbox applies what the OpenAPI document's `format: email` (an RFC 5321 mailbox) asks
// beyond net/mail, which takes UTF-8 and any domain: ASCII, at most 254 characters, a local
// part of at most 64, and a domain that is a host name (labels of 1-63 letters, digits or
// inner hyphens) or a bracketed IP address.
func mailbox(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if len(s) > 254 || at < 1 || at > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	domain := s[at+1:]
	if ip, ok := strings.CutPrefix(domain, "["); ok {
		ip, ok = strings.CutSuffix(ip, "]")
		v6, isV6 := strings.CutPrefix(ip, "IPv6:")
		addr, err := netip.ParseAddr(v6)
		return ok && err == nil && addr.Zone() == "" && (isV6 && addr.Is6() || !isV6 && addr.Is4())
	}
	domain = strings.TrimSuffix(domain, ".")
	if len(domain) > 253 {
		return false
	}
	for _, label := range strings.Split(domain, ".") {
		if len(label) < 1 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, ch := range label {
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

// MaxPasswordChars bounds a password in characters (the document's maxLength).
const MaxPasswordChars = 72

// bcryptInput is what bcrypt hashes for password. bcrypt reads at most 72 bytes (Go's refuses
// more), while 72 characters of UTF-8 take up to 288: a longer password is hashed first with
// SHA-256 (base64, 44 bytes), so every character counts. Passwords of up to 72 bytes go in
// unchanged, which keeps every hash stored before this rule valid.
func bcryptInput(password string) []byte {
	if len(password) <= 72 {
		return []byte(password)
	}
	sum := sha256.Sum256([]byte(password))
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

// HashCost is bcrypt's work factor; tests lower it to stay fast.
var HashCost = bcrypt.DefaultCost

// hashSlots bounds the bcrypt work running at once to one less than the processors Go runs
// goroutines on (at least one). A hash keeps its processor busy for its whole length (tens of
// milliseconds at the default cost), and a preempted one goes back to the run queue ahead of
// the network poller: two at once on two processors held every other request of the process
// for tens of milliseconds. A login waits for a slot instead; its latency bound is bcrypt's.
var hashSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))

// withHashSlot runs f holding a hash slot; it gives up with ctx's error if ctx ends first.
func withHashSlot(ctx context.Context, f func()) error {
	select {
	case hashSlots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("account: waiting for a password hash slot: %w", ctx.Err())
	}
	defer func() { <-hashSlots }()
	f()
	return nil
}

// HashPassword returns the bcrypt hash of password.
func HashPassword(password string) (string, error) {
	var h []byte
	var err error
	// A background context never ends, so the slot wait cannot fail.
	_ = withHashSlot(context.Background(), func() { h, err = bcrypt.GenerateFromPassword(bcryptInput(password), HashCost) })
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
	var match bool
	if werr := withHashSlot(ctx, func() { match = compareHash(hash, bcryptInput(password)) == nil }); werr != nil {
		return User{}, werr
	}
	if err != nil || !match {
		return User{}, ErrBadCredentials
	}
	return u, nil
}
