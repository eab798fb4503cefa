// Command kubectl-hitl is the kubectl plugin `kubectl hitl`: put it on PATH
// and run `kubectl hitl --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/hitl-dev/hitl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			// A distinct outcome (pending, cancelled, rejected), not a failure of the plugin.
			fmt.Fprintln(os.Stderr, err)
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
