package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/shop"
)

// seedOptions are `seed`'s settings.
type seedOptions struct {
	backend backendFlags
	demo    demo.Options
	force   bool
}

// newCmdSeed builds `seed`; runF, if not nil, replaces runSeed (tests).
func newCmdSeed(stdio IO, runF func(context.Context, seedOptions) error) *cobra.Command {
	o := seedOptions{demo: demo.Defaults()}
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Fill the store with demo data (products over skewed categories, users, carts, orders, events)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, runSeed, runF)
		},
	}
	o.backend.register(cmd)
	f := cmd.Flags()
	f.IntVar(&o.demo.Products, "products", o.demo.Products, "number of products")
	f.IntVar(&o.demo.Categories, "categories", o.demo.Categories, "number of categories (sizes are Zipf-skewed)")
	f.IntVar(&o.demo.Users, "users", o.demo.Users, "number of users (demo-N@example.com)")
	f.Uint64Var(&o.demo.Seed, "random-seed", o.demo.Seed, "random seed: the same seed gives the same data")
	f.StringVar(&o.demo.Password, "password", o.demo.Password, "password of every demo user (empty: a random one, printed once)")
	f.BoolVar(&o.force, "force", false, "seed even if the store is not empty")
	return cmd
}

func runSeed(ctx context.Context, stdio IO, o seedOptions) error {
	logger := slog.New(slog.NewTextHandler(stdio.Err, nil))
	cfg, err := o.backend.config(logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	s, err := shop.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	empty, err := s.Empty(ctx)
	if err != nil {
		return err
	}
	if !empty && !o.force {
		return errors.New("the store already holds data; seeding twice would collide (use --force to add to it anyway)")
	}
	opt := o.demo
	opt.Progress = stdio.Out
	start := time.Now()
	res, err := seedDemo(ctx, s, opt)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "done in %s: %d products, %d users, %d orders, %d carts, %d events\n",
		time.Since(start).Round(time.Millisecond), res.Products, res.Users, res.Orders, res.Carts, res.Events)
	if res.Users > 0 {
		fmt.Fprintf(stdio.Out, "demo users demo-0..%d@example.com, password: %s\n", res.Users-1, res.Password)
	}
	return nil
}

// seedDemo seeds and then applies the outbox follow-ups so history and carts are consistent.
func seedDemo(ctx context.Context, s *shop.Shop, opt demo.Options) (demo.Result, error) {
	res, err := demo.Seed(ctx, s.Stores, s.Orders, s.Carts, opt)
	if err != nil {
		return res, err
	}
	if _, err := s.Projector.Drain(ctx); err != nil {
		return res, fmt.Errorf("apply follow-ups: %w", err)
	}
	return res, nil
}
