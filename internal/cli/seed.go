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

func newSeedCmd(stdio IO) *cobra.Command {
	var b backendFlags
	opt := demo.Defaults()
	var force bool
	cmd := &cobra.Command{
		Use:   "seed",
		Short: "Fill the store with demo data (products over skewed categories, users, carts, orders, events)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(stdio.Err, nil))
			cfg, err := b.config(logger)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Minute)
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
			if !empty && !force {
				return errors.New("the store already holds data; seeding twice would collide (use --force to add to it anyway)")
			}
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
		},
	}
	b.register(cmd)
	f := cmd.Flags()
	f.IntVar(&opt.Products, "products", opt.Products, "number of products")
	f.IntVar(&opt.Categories, "categories", opt.Categories, "number of categories (sizes are Zipf-skewed)")
	f.IntVar(&opt.Users, "users", opt.Users, "number of users (demo-N@example.com)")
	f.Uint64Var(&opt.Seed, "random-seed", opt.Seed, "random seed: the same seed gives the same data")
	f.StringVar(&opt.Password, "password", opt.Password, "password of every demo user (empty: a random one, printed once)")
	f.BoolVar(&force, "force", false, "seed even if the store is not empty")
	return cmd
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
