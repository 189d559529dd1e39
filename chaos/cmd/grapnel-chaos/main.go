// Command grapnel-chaos runs Grapnel's chaos campaign (chaos/campaign) as
// root: `grapnel-chaos run --short` runs every fault kind once, `run
// --duration 30m --seed N` a randomized campaign. `grapnel-chaos clients`
// is the clients process the campaign starts inside the client namespace,
// `grapnel-chaos intrude` its intruder there;
// `grapnel-chaos check --history FILE` checks a saved history again;
// `grapnel-chaos http-get URL` fetches a URL (the campaign's control that
// a replica serves its metrics on its own loopback).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/grapnel-io/grapnel/chaos/campaign"
	"github.com/grapnel-io/grapnel/chaos/intruder"
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
	case "intrude":
		code = intrudeCmd(os.Args[2:])
	case "check":
		code = checkCmd(os.Args[2:])
	case "http-get":
		code = httpGetCmd(os.Args[2:])
	default:
		usage()
		code = 2
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  grapnel-chaos run [--short | --duration 30m] [--seed N] [--faults kind,...] [--dir DIR] [--flash=false]
  grapnel-chaos clients --addrs A,B,C --keys K1,K2 --duration D --out history.json
  grapnel-chaos check --history DIR/history.json [--timeout 10m]
  grapnel-chaos intrude --config FILE --out attempts.json
  grapnel-chaos http-get URL`)
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

// intrudeCmd runs the intruder (chaos/intruder) with the configuration
// file the campaign wrote and saves its attempts.
func intrudeCmd(args []string) int {
	fs := flag.NewFlagSet("intrude", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "intruder configuration (JSON), written by the campaign")
	out := fs.String("out", "attempts.json", "attempts written at the end")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := os.ReadFile(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intrude:", err)
		return 2
	}
	var cfg intruder.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "intrude:", *cfgPath, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	attempts := intruder.Run(ctx, cfg)
	for _, a := range attempts {
		verdict := "refused"
		switch {
		case a.Skipped != "":
			verdict = "not-tried"
		case a.Accepted:
			verdict = "ACCEPTED"
		}
		fmt.Printf("%-8s %-11s %-9s %s: %s%s\n", a.Target, a.Channel, verdict, a.What, a.Detail, a.Skipped)
	}
	if err := intruder.Save(*out, attempts); err != nil {
		fmt.Fprintln(os.Stderr, "intrude:", err)
		return 1
	}
	return 0
}

// httpGetCmd fetches a URL and says what came back; exit 0 when it was
// served (200). The campaign runs it inside a replica's host to see
// that the replica serves its metrics on its loopback.
func httpGetCmd(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: grapnel-chaos http-get URL")
		return 2
	}
	ok, detail := intruder.HTTPGet(context.Background(), args[0])
	fmt.Println(detail)
	if !ok {
		return 1
	}
	return 0
}
