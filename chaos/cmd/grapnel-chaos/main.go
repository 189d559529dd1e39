// Command grapnel-chaos runs Grapnel's chaos campaign (chaos/campaign) as
// root: `grapnel-chaos run --short` runs every fault kind once, `run
// --duration 30m --seed N` a randomized campaign. `grapnel-chaos clients`
// is the clients process the campaign starts inside the client namespace;
// `grapnel-chaos check --history FILE` checks a saved history again.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/grapnel-io/grapnel/chaos/campaign"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "run":
		code = runCmd(os.Args[2:])
	case "clients":
		code = clientsCmd(os.Args[2:])
	case "check":
		code = checkCmd(os.Args[2:])
	default:
		usage()
		code = 2
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  grapnel-chaos run [--short | --duration 30m] [--seed N] [--faults kind,...] [--dir DIR]
  grapnel-chaos clients --addrs A,B,C --keys K1,K2 --duration D --out history.json
  grapnel-chaos check --history DIR/history.json [--timeout 10m]`)
}

// clientsCmd runs the chaos clients until the duration passes or SIGINT
// or SIGTERM arrives, then writes the history.
func clientsCmd(args []string) int {
	cfg, err := campaign.ParseClientsArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := campaign.RunClients(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "clients:", err)
		return 1
	}
	return 0
}
