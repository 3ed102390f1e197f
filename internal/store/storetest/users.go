package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/shardmart/shardmart/internal/account"
)

// Users is the account contract.
func Users(t *testing.T, newRepo func(t *testing.T) account.Repository) {
	ctx := context.Background()
	t.Run("create, find by email, unique email", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		u := account.User{ID: uid("u"), Email: uid("m") + "@example.com", PasswordHash: "$2a$04$hash", CreatedAt: base}
		if err := r.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		got, err := r.UserByEmail(ctx, u.Email)
		if err != nil || got.ID != u.ID || got.PasswordHash != u.PasswordHash {
			t.Errorf("by email: %+v, %v", got, err)
		}
		dup := u
		dup.ID = uid("u")
		if err := r.CreateUser(ctx, dup); !errors.Is(err, account.ErrEmailTaken) {
			t.Errorf("duplicate email: got %v, want ErrEmailTaken", err)
		}
		if _, err := r.UserByEmail(ctx, uid("nobody")+"@example.com"); !errors.Is(err, account.ErrNotFound) {
			t.Errorf("unknown email: got %v, want ErrNotFound", err)
		}
	})
}
