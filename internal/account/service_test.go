package account_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/validation"
)

// world is the account service over a real embedded store, wired as internal/shop wires it.
type world struct {
	stores   *placement.Stores
	sessions *session.Service
	carts    *cart.Service
}

func newWorld(t *testing.T) world {
	t.Helper()
	account.HashCost = bcrypt.MinCost
	st, err := placement.Open(context.Background(), placement.Embedded(), placement.Options{SQLitePath: filepath.Join(t.TempDir(), "a.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return world{stores: st,
		sessions: &session.Service{Sessions: st.Sessions, TTL: time.Hour, Now: time.Now},
		carts:    &cart.Service{Carts: st.Carts, Products: st.Products, Orders: st.Orders, Now: time.Now}}
}

func (w world) service(s account.Sessions) *account.Service {
	return &account.Service{Users: w.stores.Users, Sessions: s, Carts: w.carts, Now: time.Now}
}

// SES-1: an unknown e-mail costs the one bcrypt comparison a known one costs, against a hash
// of the cost real hashes have; without it the answer time tells which accounts exist.
func TestUnknownEmailRunsTheComparison(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if _, err := w.service(w.sessions).Register(ctx, "known@example.com", "password123"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, email, password string }{
		{"unknown e-mail", "nobody@example.com", "password123"},
		{"wrong password", "known@example.com", "password999"},
	} {
		var n int
		var hashes [][]byte
		restore := account.CountComparisons(&n, &hashes)
		_, err := account.Authenticate(ctx, w.stores.Users, c.email, c.password)
		restore()
		if !errors.Is(err, account.ErrBadCredentials) {
			t.Fatalf("%s: got %v, want ErrBadCredentials", c.name, err)
		}
		if n != 1 {
			t.Fatalf("%s: %d bcrypt comparisons, want 1", c.name, n)
		}
		if cost, err := bcrypt.Cost(hashes[0]); err != nil || cost != account.HashCost {
			t.Errorf("%s: compared against a hash of cost %d (%v), real hashes cost %d", c.name, cost, err, account.HashCost)
		}
	}
}

// flakySessions is the real session service whose Revoke of one id fails once: a crash or an
// unreachable store between the cart merge and the end of the guest session.
type flakySessions struct {
	*session.Service
	failOnce string
	started  []string // ids of the sessions StartFor created
}

func (f *flakySessions) StartFor(ctx context.Context, userID, ip, ua string) (string, session.Session, error) {
	tok, s, err := f.Service.StartFor(ctx, userID, ip, ua)
	f.started = append(f.started, s.ID)
	return tok, s, err
}

func (f *flakySessions) Revoke(ctx context.Context, id string) error {
	if id == f.failOnce {
		f.failOnce = ""
		return errors.New("sessions store unreachable")
	}
	return f.Service.Revoke(ctx, id)
}

// SES-1 CRT-5: a login that fails after merging but before revoking the guest session leaves
// the guest token working and no stray new session; repeating it merges nothing twice, hands
// out a token bound to the user, and only then does the guest token stop working.
func TestLoginRepeatedAfterFailedRevokeEndsConsistent(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	now := time.Now().UTC()
	p := catalog.Product{ID: "mug", Name: "Mug", Category: "kitchen", Price: 1250, Stock: map[string]int64{"eu": 9}, CreatedAt: now, UpdatedAt: now}
	if err := w.stores.Products.CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	u, err := w.service(w.sessions).Register(ctx, "ann@example.com", "password123")
	if err != nil {
		t.Fatal(err)
	}
	guestToken, guest, err := w.sessions.Start(ctx, "203.0.113.9", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.carts.Put(ctx, cart.Guest(guest.ID), guest.ExpiresAt, "mug", 2); err != nil {
		t.Fatal(err)
	}
	flaky := &flakySessions{Service: w.sessions, failOnce: guest.ID}
	svc := w.service(flaky)
	login := account.Login{Caller: guest, Email: "ann@example.com", Password: "password123"}

	if _, err := svc.Login(ctx, login); err == nil {
		t.Fatal("login whose revoke failed reported success")
	}
	if _, err := w.sessions.Authenticate(ctx, guestToken); err != nil {
		t.Fatalf("guest token after the failed login: %v, want it still working so the login can be repeated", err)
	}
	if len(flaky.started) != 1 {
		t.Fatalf("first attempt started %d sessions, want 1", len(flaky.started))
	}
	if _, err := w.stores.Sessions.GetSession(ctx, flaky.started[0], time.Now()); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("the failed attempt's new session (its token never handed out): %v, want it revoked", err)
	}

	res, err := svc.Login(ctx, login)
	if err != nil {
		t.Fatalf("repeated login: %v", err)
	}
	if _, err := w.sessions.Authenticate(ctx, guestToken); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("guest token after the login: %v, want ErrNotFound", err)
	}
	got, err := w.sessions.Authenticate(ctx, res.Token)
	if err != nil || got.UserID != u.ID {
		t.Fatalf("new token: %+v, %v; want a session of %s", got, err, u.ID)
	}
	c, err := w.carts.Get(ctx, cart.User(u.ID))
	if err != nil || len(c.Items) != 1 || c.Items[0].Quantity != 2 {
		t.Errorf("user cart after the repeated login: %+v, %v; want the 2 mugs once", c.Items, err)
	}
}

// Passwords are 8-72 characters, however many bytes: a 72-character password of 4-byte
// characters registers and logs in, a password differing only past bcrypt's 72nd byte does
// not, and a password stored before long ones were pre-hashed (a plain bcrypt hash of up to
// 72 bytes) still logs in.
func TestPasswordLengthCountsCharacters(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	long := strings.Repeat("😀", account.MaxPasswordChars) // 288 bytes
	if _, err := w.service(w.sessions).Register(ctx, "long@example.com", long); err != nil {
		t.Fatalf("register with 72 four-byte characters: %v", err)
	}
	if _, err := account.Authenticate(ctx, w.stores.Users, "long@example.com", long); err != nil {
		t.Errorf("login with the 288-byte password: %v", err)
	}
	sameStart := strings.Repeat("😀", 18) + strings.Repeat("a", 54) // the same first 72 bytes
	if _, err := account.Authenticate(ctx, w.stores.Users, "long@example.com", sameStart); !errors.Is(err, account.ErrBadCredentials) {
		t.Errorf("login with a password sharing only the first 72 bytes: %v, want ErrBadCredentials", err)
	}
	if _, err := w.service(w.sessions).Register(ctx, "toolong@example.com", long+"a"); err == nil {
		t.Error("a 73-character password was registered")
	}
	// A hash made the old way: bcrypt over the password's bytes.
	old, err := bcrypt.GenerateFromPassword([]byte("12345678ÿÿ"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.stores.Users.CreateUser(ctx, account.User{ID: "old", Email: "old@example.com", PasswordHash: string(old), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := account.Authenticate(ctx, w.stores.Users, "old@example.com", "12345678ÿÿ"); err != nil {
		t.Errorf("login against a hash stored before pre-hashing: %v", err)
	}
}

// RegisterMany hashes the password once (every user gets the same salted hash, which two
// computations never give), creates each e-mail once however often it is called, and its
// users log in like registered ones.
func TestRegisterManySharesOneHashAndIsIdempotent(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	svc := w.service(w.sessions)
	if _, err := svc.Register(ctx, "before@example.com", "an older password"); err != nil {
		t.Fatal(err)
	}
	emails := []string{"a@example.com", " B@Example.com", "before@example.com", "c@example.com"}
	first, err := svc.RegisterMany(ctx, account.BulkRegistration{Password: "bulk password", Emails: emails})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(emails) {
		t.Fatalf("got %d results, want %d", len(first), len(emails))
	}
	hashes := map[string]bool{}
	for i, r := range first {
		if want := i != 2; r.Created != want {
			t.Errorf("%s: created %v, want %v", emails[i], r.Created, want)
		}
		stored, err := w.stores.Users.UserByEmail(ctx, account.NormalizeEmail(emails[i]))
		if err != nil || stored.ID != r.User.ID {
			t.Errorf("%s: stored %+v (%v), answered id %s", emails[i], stored, err, r.User.ID)
		}
		if r.Created {
			hashes[stored.PasswordHash] = true
		}
	}
	if len(hashes) != 1 {
		t.Errorf("the created users have %d distinct password hashes, want 1 (the password hashed once)", len(hashes))
	}
	if _, err := account.Authenticate(ctx, w.stores.Users, "b@example.com", "bulk password"); err != nil {
		t.Errorf("log in as a user created in bulk: %v", err)
	}
	if _, err := account.Authenticate(ctx, w.stores.Users, "before@example.com", "an older password"); err != nil {
		t.Errorf("the existing user's password changed: %v", err)
	}
	again, err := svc.RegisterMany(ctx, account.BulkRegistration{Password: "bulk password", Emails: emails})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Created || r.User.ID != first[i].User.ID {
			t.Errorf("repeated call, %s: created %v, id %s, want the first call's %s", emails[i], r.Created, r.User.ID, first[i].User.ID)
		}
	}
}

// With Sessions, each user the call creates gets a session bound to it, and a user registered
// before the call gets none: the admin token opens no existing account.
func TestRegisterManyStartsSessionsForNewUsersOnly(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	svc := w.service(w.sessions)
	before, err := svc.Register(ctx, "before@example.com", "an older password")
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.RegisterMany(ctx, account.BulkRegistration{Password: "bulk password", Sessions: true,
		Emails: []string{"a@example.com", "before@example.com", "b@example.com"}, IP: "192.0.2.7", UserAgent: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]bool{}
	for _, r := range got {
		if r.User.ID == before.ID {
			if r.Token != "" {
				t.Errorf("a session was started for the user registered before the call")
			}
			continue
		}
		if r.Token == "" || tokens[r.Token] {
			t.Fatalf("%s: token %q, want a new one of its own", r.User.Email, r.Token)
		}
		tokens[r.Token] = true
		sess, err := w.sessions.Authenticate(ctx, r.Token)
		if err != nil || sess.UserID != r.User.ID {
			t.Errorf("%s: its token resolves to %+v (%v), want a session of user %s", r.User.Email, sess, err, r.User.ID)
		}
	}
	again, err := svc.RegisterMany(ctx, account.BulkRegistration{Password: "bulk password", Sessions: true, Emails: []string{"a@example.com"}})
	if err != nil || again[0].Token != "" {
		t.Errorf("a repeated call started a session for a user it did not create: %+v, %v", again, err)
	}
}

// A bad e-mail or password is named by its place in the request, and nothing is written.
func TestRegisterManyChecksEverythingFirst(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	svc := w.service(w.sessions)
	for _, c := range []struct {
		name, password string
		emails         []string
		want           []string
	}{
		{"bad e-mails", "long enough", []string{"ok@example.com", "not an address", "ok2@example.com", "x@-bad-.com"}, []string{"users.1.email", "users.3.email"}},
		{"weak password", "short", []string{"ok@example.com"}, []string{"password"}},
		{"no users", "long enough", nil, []string{"users"}},
		{"too many users", "long enough", make([]string, account.MaxRegisterMany+1), []string{"users"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := svc.RegisterMany(ctx, account.BulkRegistration{Password: c.password, Emails: c.emails})
			fields, ok := validation.Fields(err)
			var got []string
			for _, f := range fields {
				got = append(got, f.Field)
			}
			if !ok || strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v (%v), want a validation error naming %v", got, err, c.want)
			}
		})
	}
	if _, err := w.stores.Users.UserByEmail(ctx, "ok@example.com"); !errors.Is(err, account.ErrNotFound) {
		t.Errorf("a refused call wrote a user: %v", err)
	}
}
