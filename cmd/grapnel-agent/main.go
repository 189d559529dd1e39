// Command grapnel-agent runs the Grapnel agent on a compute unit: it runs
// the workloads the server assigns to it as processes or podman
// containers and follows the leader of the replicas.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/sdnotify"
)

func main() {
	// Without grapnel-process-shim next to this binary, a workload process
	// is started through this binary as its shim.
	process.RunShimIfRequested()
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 2 for a configuration error, 1 when the
// agent failed.
func run(args []string) int {
	cfg, err := loadConfig(args, os.LookupEnv)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-agent: %v\nRun 'grapnel-agent --help' for the options.\n", err)
		return 2
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	acfg, err := cfg.agentConfig(log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
		return 2
	}
	// systemd (Type=notify): READY=1, STATUS= and the watchdog
	// (docs/operations.md, "systemd"); without NOTIFY_SOCKET a no-op.
	acfg.Notify = sdnotify.New(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, acfg); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
		return 1
	}
	return 0
}
