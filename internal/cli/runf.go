package cli

import "context"

// runOrRunF runs a command on its parsed options: runF when a test gave one (to see the
// options without touching a store or a server), run otherwise.
func runOrRunF[O any](ctx context.Context, stdio IO, o O, run func(context.Context, IO, O) error, runF func(context.Context, O) error) error {
	if runF != nil {
		return runF(ctx, o)
	}
	return run(ctx, stdio, o)
}
