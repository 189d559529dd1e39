// Package agentcmd is the command grapnel-agent: the Grapnel agent on a
// compute unit. It runs the workloads the server assigns to it as
// processes or podman containers and follows the leader of the replicas.
// The multi-call binary grapnel runs it as `grapnel agent` or when
// started under the name grapnel-agent (cmd/grapnel); cmd/grapnel-agent
// builds it alone.
package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/residency"
	"github.com/grapnel-io/grapnel/internal/sdnotify"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
)

// Main runs the agent with args (the command line without the program
// name) and returns the exit code. A binary that holds it must call
// process.RunShimIfRequested first thing in its main: without
// grapnel-process-shim next to the binary, a workload process is
// started through the binary itself as its shim.
func Main(args []string) int { return run(args) }

// trimAfter is when the agent drops its start-up code pages from the
// resident set (internal/residency): by then it has connected, taken its
// workloads again after a power cycle, and settled. Once: an agent has no
// busy spells that bring much code back.
const trimAfter = 20 * time.Second

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
	if !acfg.Insecure {
		// Certificates rotate without a restart: on file change and on
		// SIGHUP; a reload that fails keeps the old ones.
		if acfg.Certs, err = rpc.NewTLSStore(acfg.TLS); err != nil {
			fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
			return 2
		}
		acfg.Certs.OnError(func(err error) {
			log.Error("certificate reload failed; keeping the previous certificates", "error", err)
		})
		watch, err := tlsreload.Watch(acfg.Certs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
			return 1
		}
		defer watch.Stop()
	}
	// systemd (Type=notify): READY=1, STATUS= and the watchdog
	// (docs/operations.md, "systemd"); without NOTIFY_SOCKET a no-op.
	acfg.Notify = sdnotify.New(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	trim := time.AfterFunc(trimAfter, func() {
		if d, err := residency.DropExecutablePages(); err == nil {
			log.Debug("code pages dropped from the resident set", "bytes", d.Bytes, "faultAround", d.FaultAround())
		}
	})
	defer trim.Stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hupDone := make(chan struct{})
	gossipHup := make(chan struct{}, 1)
	if cfg.GossipKeyFile != "" {
		acfg.GossipHangup = gossipHup
		acfg.GossipLoadKeys = func() (gossipmeta.Keys, error) { return gossipmeta.ReadKeyFile(cfg.GossipKeyFile) }
	}
	go func() { // SIGHUP: re-read the certificates and the gossip keys; stops with ctx
		defer close(hupDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case gossipHup <- struct{}{}:
				default:
				}
				if acfg.Certs == nil {
					continue
				}
				if err := acfg.Certs.Reload(); err != nil {
					log.Error("certificate reload failed; keeping the previous certificates", "error", err)
				} else {
					log.Info("certificates reloaded", "generation", acfg.Certs.Current().Generation)
				}
			}
		}
	}()
	defer func() { stop(); <-hupDone }()
	if err := agent.Run(ctx, acfg); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
		return 1
	}
	return 0
}
