package placement

import (
	"context"
	"errors"
)

// openMongo is replaced when the MongoDB backend lands (issue 4).
func openMongo(context.Context, Options) (backend, error) {
	return nil, errors.New("the mongo backend is not built into this version yet")
}
