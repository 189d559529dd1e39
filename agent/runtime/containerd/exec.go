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

// Time limits of one nerdctl or ctr call; a hung containerd must not hang
// a control loop.
const (
	callTimeout = 30 * time.Second
	// runTimeout also covers an image pull.
	runTimeout = 5 * time.Minute
	waitDelay  = 5 * time.Second
)

// ctrResult is what one nerdctl or ctr call printed.
type ctrResult struct {
	stdout, stderr string
}

// exec runs ctr with the agent's socket and namespace before args.
func (r *Runtime) exec(ctx context.Context, timeout time.Duration, args ...string) (ctrResult, error) {
	return r.run(ctx, timeout, "ctr", r.ctr, []string{"--address", r.address, "--namespace", r.namespace}, args, 2)
}

// nerdctl runs nerdctl with the agent's socket, namespace, data root and
// CNI configuration directory before args.
func (r *Runtime) nerdctl(ctx context.Context, timeout time.Duration, args ...string) (ctrResult, error) {
	return r.nerdctlWith(ctx, timeout, nil, args...)
}

// nerdctlWith is nerdctl with a workload's generalOptions after the
// agent's own global options.
func (r *Runtime) nerdctlWith(ctx context.Context, timeout time.Duration, general []string, args ...string) (ctrResult, error) {
	global := []string{"--address", r.address, "--namespace", r.namespace}
	if r.dataRoot != "" {
		global = append(global, "--data-root", r.dataRoot)
	}
	if r.netconf != "" {
		global = append(global, "--cni-netconfpath", r.netconf)
	}
	global = append(global, general...)
	return r.run(ctx, timeout, "nerdctl", r.binary, global, args, 1)
}

// run runs one command. Only the subcommand (the first words of args) is
// logged and named in errors: `run`'s options hold the workload's
// environment.
func (r *Runtime) run(ctx context.Context, timeout time.Duration, what, binary string, global, args []string, words int) (ctrResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(global, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	start := r.clk().Now()
	err := cmd.Run()
	name := what + " " + strings.Join(args[:min(words, len(args))], " ")
	r.log.Debug(what, "call", name, "took", clock.Since(r.clk(), start), "err", err)
	res := ctrResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		msg := strings.TrimSpace(res.stderr)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if msg == "" {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		return res, fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return res, nil
}

// notFound reports whether a ctr or nerdctl error says the container or
// task does not exist (containerd's errdefs.ErrNotFound prints "not
// found", nerdctl "no such container").
func notFound(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "no such container"))
}
