package podman

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	start := r.clk().Now()
	err := cmd.Run()
	r.log.Debug("podman", "args", loggedArgs(args), "took", clock.Since(r.clk(), start), "err", err)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if msg == "" {
			return "", fmt.Errorf("podman %s: %w", subcommand(args), err)
		}
		return "", fmt.Errorf("podman %s: %w: %s", subcommand(args), err, msg)
	}
	return stdout.String(), nil
}

// subcommand names a podman call in errors: the first argument that is
// one of the subcommands this package uses, so that generalOptions in
// front of `run` do not hide it.
func subcommand(args []string) string {
	for _, a := range args {
		switch a {
		case "run", "start", "ps", "rm", "stop", "logs", "info":
			return a
		}
	}
	return strings.Join(args, " ")
}

// loggedArgs is args as the debug log shows them: the values of
// environment options are left out, since that is where a workload's
// secrets usually go (docs/secrets.md); the names stay.
func loggedArgs(args []string) []string {
	var out []string
	for i, a := range args {
		v := a
		switch {
		case i > 0 && (args[i-1] == "-e" || args[i-1] == "--env"):
			v = hideValue(a)
		case strings.HasPrefix(a, "--env="):
			v = "--env=" + hideValue(strings.TrimPrefix(a, "--env="))
		case strings.HasPrefix(a, "-e="):
			v = "-e=" + hideValue(strings.TrimPrefix(a, "-e="))
		}
		if v != a && out == nil {
			out = append([]string(nil), args...)
		}
		if out != nil {
			out[i] = v
		}
	}
	if out == nil {
		return args
	}
	return out
}

func hideValue(kv string) string {
	if k, _, ok := strings.Cut(kv, "="); ok {
		return k + "=***"
	}
	return kv // NAME alone: podman takes the agent's own value
}
