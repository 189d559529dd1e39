// Command grapnel is the operator's command line for a Grapnel cluster: the
// verbs of the Ankaios `ank` CLI (get, set, apply, delete, run, logs) over
// the Ankaios CLI stream. This package only wires flags and environment to
// package cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	a := newApp(os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	code, done := completeEnv(ctx, os.Args[0], os.Args[1:], a)
	if !done {
		code = run(ctx, os.Args[1:], a)
	}
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code. An error is
// printed as one line on stderr.
func run(ctx context.Context, args []string, a *app) int {
	root := newRoot(a)
	root.SetArgs(spellOutGlobalS(args))
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	printError(a.stderr, err)
	return exitError
}

func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "error: %v\n", err)
}
