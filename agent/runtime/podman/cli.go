package podman

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Bounds on podman calls, so that a wedged podman cannot hang a control
// loop forever.
const (
	// callTimeout bounds quick calls: ps, rm, info.
	callTimeout = 30 * time.Second
	// runTimeout bounds `podman run`, which may pull an image.
	runTimeout = 5 * time.Minute
	// stopSlack is added to the grace period to bound `podman stop`.
	stopSlack = 30 * time.Second
	// waitDelay bounds how long a finished podman may keep its output
	// pipes open through a process it left behind.
	waitDelay = 5 * time.Second
)

// exec runs podman with args under its own timeout and returns its
// standard output. A failure carries podman's standard error, which is
// where podman says what went wrong.
func (r *Runtime) exec(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	out, err := r.run(ctx, timeout, "", subcommand(args), loggedArgs(args), args)
	if err != nil {
		return "", err
	}
	return out, nil
}

// run runs podman with args and input on its standard input under its
// own timeout, and returns its standard output, on failure too (with an
// error naming the call and carrying podman's standard error). The debug
// log names the call and shows logged, which the caller makes free of
// anything a workload's config holds (loggedArgs); nil shows no argument.
func (r *Runtime) run(ctx context.Context, timeout time.Duration, input, name string, logged []string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	cmd.WaitDelay = waitDelay
	start := r.clk().Now()
	err := cmd.Run()
	if logged != nil {
		r.log.Debug("podman", "args", logged, "took", clock.Since(r.clk(), start), "err", err)
	} else {
		r.log.Debug("podman", "call", name, "took", clock.Since(r.clk(), start), "err", err)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if msg == "" {
			return stdout.String(), fmt.Errorf("podman %s: %w", name, err)
		}
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", name, err, msg)
	}
	return stdout.String(), nil
}

// subcommand names a podman call in errors: the first argument that is
// one of the subcommands this package uses, so that generalOptions in
// front of `run` do not hide it.
func subcommand(args []string) string {
	for _, a := range args {
		if subcommands[a] {
			return a
		}
	}
	return "(no known subcommand)"
}

// loggedArgs is args as the debug log shows them. Nothing that comes
// from a workload's rendered runtimeConfig is logged, at any level: that
// is where its secrets go (`--env` values, options, the command's
// arguments; docs/secrets.md). The general options in front of the
// subcommand are counted, not shown; of `podman run` only the container's
// name is shown. Environment values left anywhere else are hidden as
// well; their names stay.
func loggedArgs(args []string) []string {
	k := slices.IndexFunc(args, func(a string) bool { return subcommands[a] })
	if k < 0 {
		return []string{fmt.Sprintf("(%d arguments not logged)", len(args))}
	}
	var out []string
	if args[k] == "run" {
		out = []string{"run"}
		if i := slices.Index(args[k:], "--name"); i >= 0 && k+i+1 < len(args) {
			out = append(out, "--name", args[k+i+1])
		}
		return append(out, fmt.Sprintf("(%d arguments of the runtimeConfig not logged)", len(args)-k-1))
	}
	out = hideEnv(args[k:])
	if k > 0 {
		out = append(out, fmt.Sprintf("(%d general options of the runtimeConfig not logged)", k))
	}
	return out
}

// subcommands are the podman subcommands this package uses.
var subcommands = map[string]bool{"run": true, "start": true, "ps": true, "rm": true, "stop": true, "logs": true, "info": true}

// hideEnv is a copy of args with the values of environment options
// hidden.
func hideEnv(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		v := a
		switch {
		case i > 0 && (args[i-1] == "-e" || args[i-1] == "--env"):
			v = hideValue(a)
		case strings.HasPrefix(a, "--env="):
			v = "--env=" + hideValue(strings.TrimPrefix(a, "--env="))
		case strings.HasPrefix(a, "-e="):
			v = "-e=" + hideValue(strings.TrimPrefix(a, "-e="))
		case strings.HasPrefix(a, "-e") && len(a) > 2 && strings.Contains(a, "="):
			v = "-e" + hideValue(a[2:])
		}
		out[i] = v
	}
	return out
}

func hideValue(kv string) string {
	if k, _, ok := strings.Cut(kv, "="); ok {
		return k + "=***"
	}
	return kv // NAME alone: podman takes the agent's own value
}
