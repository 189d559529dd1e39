// Command grapnel-flashfs serves chaos/flashfs mounts and sends them
// commands: a test file system that loses unsynced writes at a power cut
// and fills up, turns read-only, fails with EIO or flips bits on
// command (docs/chaos.md, "The flash filesystem").
//
//	grapnel-flashfs serve --control SOCK [--model per-directory|journal] [--seed N] NAME=BACKING:MOUNTPOINT...
//	grapnel-flashfs ctl --control SOCK COMMAND...
//
// serve mounts every backing directory at its mount point and answers
// the control language on the unix socket SOCK until SIGINT or SIGTERM,
// then unmounts cleanly (everything becomes durable). It needs root and
// /dev/fuse. ctl sends one command and prints the answer.
//
// Exit status: 0 on success, 1 when a command is refused, 2 when the
// mounts or the socket cannot be set up.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/grapnel-io/grapnel/chaos/flashfs"
)

func main() { os.Exit(run(os.Args[1:])) }

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  grapnel-flashfs serve --control SOCK [--model per-directory|journal] [--seed N] NAME=BACKING:MOUNTPOINT...
  grapnel-flashfs ctl --control SOCK COMMAND...

commands:
%s
`, flashfs.Usage)
}

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "ctl":
		return ctl(args[1:])
	case "-h", "--help", "help":
		usage()
		return 0
	}
	fmt.Fprintf(os.Stderr, "grapnel-flashfs: unknown subcommand %q\n", args[0])
	usage()
	return 2
}

func serve(args []string) int {
	fs := flag.NewFlagSet("grapnel-flashfs serve", flag.ContinueOnError)
	control := fs.String("control", "", "unix socket of the control language (required)")
	model := fs.String("model", "per-directory", "when namespace operations become durable: per-directory (an fsync of each directory they change) or journal (any fsync)")
	seed := fs.Uint64("seed", 1, "seed of the random tears and flips")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *control == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "grapnel-flashfs serve: --control and at least one NAME=BACKING:MOUNTPOINT are required")
		return 2
	}
	m, err := flashfs.ParseModel(*model)
	if err != nil {
		fmt.Fprintln(os.Stderr, "grapnel-flashfs serve: --model:", err)
		return 2
	}
	logger := log.New(os.Stderr, "grapnel-flashfs: ", log.LstdFlags|log.Lmicroseconds)
	g := flashfs.NewGroup(flashfs.Options{Model: m, Seed: *seed, Logf: logger.Printf})
	fail := func(err error) int {
		logger.Print(err)
		if cerr := g.Close(); cerr != nil {
			logger.Print(cerr)
		}
		return 2
	}
	for _, spec := range fs.Args() {
		name, rest, ok1 := strings.Cut(spec, "=")
		backing, mp, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || backing == "" || mp == "" {
			return fail(fmt.Errorf("mount %q: want NAME=BACKING:MOUNTPOINT", spec))
		}
		mnt, err := g.Mount(name, backing, mp)
		if err != nil {
			return fail(err)
		}
		logger.Printf("%s: %s on %s (%s model)", name, mnt.Backing(), mnt.Mountpoint(), m)
	}
	if err := os.Remove(*control); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(fmt.Errorf("control socket %s: %w", *control, err))
	}
	l, err := net.Listen("unix", *control)
	if err != nil {
		return fail(fmt.Errorf("control socket: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	logger.Printf("ready: control on %s", *control)
	if err := g.Serve(l); err != nil {
		return fail(err)
	}
	os.Remove(*control)
	if err := g.Close(); err != nil {
		logger.Print(err)
		return 2
	}
	logger.Print("unmounted")
	return 0
}

func ctl(args []string) int {
	fs := flag.NewFlagSet("grapnel-flashfs ctl", flag.ContinueOnError)
	control := fs.String("control", "", "unix socket of a grapnel-flashfs serve (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *control == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "grapnel-flashfs ctl: --control and a command are required")
		return 2
	}
	out, err := flashfs.Command(*control, strings.Join(fs.Args(), " "))
	if err != nil {
		fmt.Fprintln(os.Stderr, "grapnel-flashfs:", err)
		return 1
	}
	fmt.Println(strings.ReplaceAll(out, " | ", "\n"))
	return 0
}
