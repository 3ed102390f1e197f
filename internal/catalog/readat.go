package catalog

import (
	"context"
	"time"
)

type readAtKey struct{}

// WithReadAt marks a read-model write as a provisional copy of the store of record read at t:
// one an order's own request makes so the stock it took shows at once, while the projector's
// copy, serialised across processes, is the one that decides. A read model orders provisional
// copies by t, below the projector's, and applies them only where they change no search key.
func WithReadAt(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, readAtKey{}, t)
}

// ReadAt returns the time WithReadAt set, if any.
func ReadAt(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(readAtKey{}).(time.Time)
	return t, ok
}
