package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Time limits of one ctr call; a hung containerd must not hang a control
// loop.
const (
	callTimeout = 30 * time.Second
	// runTimeout also covers an image pull.
	runTimeout = 5 * time.Minute
	waitDelay  = 5 * time.Second
)

// ctrResult is what one ctr call printed.
type ctrResult struct {
	stdout, stderr string
}

// exec runs ctr with the agent's socket and namespace before args. Only
// the subcommand is logged: `ctr run`'s options hold the workload's
// environment.
func (r *Runtime) exec(ctx context.Context, timeout time.Duration, args ...string) (ctrResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--address", r.address, "--namespace", r.namespace}, args...)
	cmd := exec.CommandContext(ctx, r.binary, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	start := r.clk().Now()
	err := cmd.Run()
	name := strings.Join(args[:min(2, len(args))], " ")
	r.log.Debug("ctr", "call", name, "took", clock.Since(r.clk(), start), "err", err)
	res := ctrResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		msg := strings.TrimSpace(res.stderr)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if msg == "" {
			return res, fmt.Errorf("ctr %s: %w", name, err)
		}
		return res, fmt.Errorf("ctr %s: %w: %s", name, err, msg)
	}
	return res, nil
}

// notFound reports whether a ctr error says the container or task does
// not exist (containerd's errdefs.ErrNotFound prints "not found").
func notFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "not found")
}
