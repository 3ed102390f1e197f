package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/account"
)

// Users are keyed by email (userDoc): the unique value is the _id.
type users Store

func (r *users) store() *Store { return (*Store)(r) }

func (r *users) CreateUser(ctx context.Context, u account.User) error {
	doc := userDoc{Email: u.Email, UserID: u.ID, PasswordHash: u.PasswordHash, CreatedAt: u.CreatedAt}
	if _, err := r.store().coll(collUsers).InsertOne(ctx, doc); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return account.ErrEmailTaken
		}
		return fmt.Errorf("mongo: insert user: %w", err)
	}
	return nil
}

// UserByEmail reads the primary: a login right after registration must find the account.
func (r *users) UserByEmail(ctx context.Context, email string) (account.User, error) {
	var doc userDoc
	found, err := decodeOne(r.store().coll(collUsers).FindOne(ctx, d(e("_id", email))), &doc)
	if err != nil {
		return account.User{}, fmt.Errorf("mongo: read user: %w", err)
	}
	if !found {
		return account.User{}, account.ErrNotFound
	}
	return account.User{ID: doc.UserID, Email: doc.Email, PasswordHash: doc.PasswordHash, CreatedAt: doc.CreatedAt.UTC()}, nil
}
