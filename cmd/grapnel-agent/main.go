// Command grapnel-agent runs the Grapnel agent on a compute unit.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/rpc"
)

func main() {
	fs := pflag.NewFlagSet("grapnel-agent", pflag.ContinueOnError)
	name := fs.StringP("name", "n", os.Getenv("GRAPNEL_AGENT_NAME"), "agent name ([a-zA-Z0-9_-])")
	servers := fs.StringP("server-url", "s", envOr("GRAPNEL_AGENT_SERVER_URL", "127.0.0.1:25551"), "server addresses, comma-separated")
	insecureMode := fs.BoolP("insecure", "k", os.Getenv("GRAPNEL_AGENT_INSECURE") == "true", "connect without TLS")
	ca := fs.String("ca_pem", os.Getenv("GRAPNEL_AGENT_CA_PEM"), "CA certificate (PEM)")
	crt := fs.String("crt_pem", os.Getenv("GRAPNEL_AGENT_CRT_PEM"), "agent certificate (PEM)")
	key := fs.String("key_pem", os.Getenv("GRAPNEL_AGENT_KEY_PEM"), "agent key (PEM)")
	tags := fs.StringSliceP("tag", "t", nil, "tag k=v (repeatable)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fail(err)
	}
	cfg := agent.Config{Name: *name, Insecure: *insecureMode, TLS: rpc.TLSFiles{CA: *ca, Cert: *crt, Key: *key}, Tags: map[string]string{}}
	for _, s := range strings.Split(*servers, ",") {
		s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "https://"), "http://")
		if s != "" {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	for _, t := range *tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			fail(fmt.Errorf("--tag %q: expected key=value", t))
		}
		cfg.Tags[k] = v
	}
	if !cfg.Insecure && cfg.TLS.Empty() {
		fail(errors.New("missing certificate files: give --ca_pem, --crt_pem and --key_pem, or --insecure/-k"))
	}
	if len(cfg.Servers) == 0 {
		fail(errors.New("--server-url: no server address"))
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel-agent: %v\n", err)
		os.Exit(1)
	}
}

func envOr(k, d string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return d
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "grapnel-agent: %v\nRun 'grapnel-agent --help' for the options.\n", err)
	os.Exit(2)
}
