// Command grapnel is Grapnel's one binary: the operator's command line
// for a Grapnel cluster, the verbs of the Ankaios `ank` CLI (get, set,
// apply, delete, run, logs) over the Ankaios CLI stream, and, by
// subcommand or by the name it is started under, the replica (`grapnel
// server`, grapnel-server), the agent (`grapnel agent`, grapnel-agent)
// and the process runtime's shim (grapnel-process-shim), see
// multicall.go. The CLI part only wires flags and environment to package
// cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitInterrupted = 130
)

func main() {
	// The agent starts a process workload through this binary as its
	// shim (named grapnel-process-shim, with the shim's variable set):
	// first, before anything else runs.
	process.RunShimIfRequested()
	// containerd's shim runs the agent's executable, this one behind the
	// grapnel-agent link, as the logger of every containerd workload.
	containerd.RunLoggerIfRequested()
	if code, ok := runProgram(program(os.Args[0], os.Args[1:])); ok {
		os.Exit(code)
	}
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
