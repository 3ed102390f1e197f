package sharding

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Admin is what the administration code needs from a mongos: run a command
// and read config.* documents. The driver-backed implementation is
// DriverAdmin; tests substitute a recorder to check the exact documents sent.
type Admin interface {
	RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error)
	Find(ctx context.Context, db, coll string, filter bson.D) ([]bson.Raw, error)
}

// DriverAdmin runs commands through the official driver.
type DriverAdmin struct{ Client *mongo.Client }

// RunCommand runs cmd on db and returns the reply; a reply with ok: 0 is an error.
func (a DriverAdmin) RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	raw, err := a.Client.Database(db).RunCommand(ctx, cmd).Raw()
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", cmd[0].Key, db, err)
	}
	return raw, nil
}

// Find returns every document of db.coll matching filter.
func (a DriverAdmin) Find(ctx context.Context, db, coll string, filter bson.D) ([]bson.Raw, error) {
	cur, err := a.Client.Database(db).Collection(coll).Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("find %s.%s: %w", db, coll, err)
	}
	defer cur.Close(ctx)
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("find %s.%s: %w", db, coll, err)
	}
	return out, nil
}

// codeNamespaceNotFound is the server error code for a missing collection.
const codeNamespaceNotFound = 26

func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Code == codeNamespaceNotFound
	}
	return false
}

func decodeAll[T any](raws []bson.Raw) ([]T, error) {
	out := make([]T, 0, len(raws))
	for _, r := range raws {
		var v T
		if err := bson.Unmarshal(r, &v); err != nil {
			return nil, fmt.Errorf("decode %T: %w", v, err)
		}
		out = append(out, v)
	}
	return out, nil
}
