// Command kubectl-task is the `kubectl task` plugin: put it on PATH and kubectl finds it.
// The commands live in package cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	_ "time/tzdata" // convert validates schedules' IANA time zones without the system's zoneinfo

	"example.com/task-operator/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := cli.NewRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, cli.ErrorText(err))
		os.Exit(1)
	}
}
