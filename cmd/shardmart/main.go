// Command shardmart is the e-commerce data platform's single binary; see `shardmart --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardmart/shardmart/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.NewRootCmd(cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardmart:", err)
		os.Exit(1)
	}
}
