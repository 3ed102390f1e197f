package placement

import (
	"context"
	"errors"
)

// openCassandra is replaced when the Cassandra backend lands (issue 3).
func openCassandra(context.Context, Options) (backend, error) {
	return nil, errors.New("the cassandra backend is not built into this version yet")
}
