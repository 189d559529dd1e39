package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/cmd/internal/agentcmd"
	"github.com/grapnel-io/grapnel/cmd/internal/servercmd"
)

// The programs of the multi-call binary. The install is one file, grapnel,
// with grapnel-server, grapnel-agent and grapnel-process-shim as links to
// it: one copy of the Go runtime, gRPC and protobuf instead of four
// (docs/operations.md, "Install size").
const (
	progCLI    = "grapnel"
	progServer = "grapnel-server"
	progAgent  = "grapnel-agent"
	progShim   = process.ShimCommand
)

// Subcommands that name a program rather than a CLI verb.
const (
	subServer = "server"
	subAgent  = "agent"
	subShim   = "shim"
)

// program picks the program a command line runs, and its arguments: by
// the name the binary was started under (argv0's base name, as a link
// gives it), else by the first argument. `grapnel agent` is the agent
// unless a verb of the CLI's agent command follows (`grapnel agent resync
// NAME` stays the operator's verb); a flag or nothing after it is the
// agent's.
func program(argv0 string, args []string) (string, []string) {
	switch base := filepath.Base(argv0); base {
	case progServer, progAgent, progShim:
		return base, args
	}
	if len(args) == 0 {
		return progCLI, args
	}
	switch args[0] {
	case subServer:
		return progServer, args[1:]
	case subShim:
		return progShim, args[1:]
	case subAgent:
		if len(args) > 1 && agentVerb(args[1]) {
			return progCLI, args
		}
		return progAgent, args[1:]
	}
	return progCLI, args
}

// agentVerb reports whether word is a subcommand of the CLI's `grapnel
// agent` (resync, maintenance, ...); `grapnel help agent` lists them.
func agentVerb(word string) bool {
	for _, c := range newAgent(&app{}).Commands() {
		if c.Name() == word {
			return true
		}
	}
	return false
}

// runShim is the shim's program started without its variable: the agent
// starts it, not a person.
func runShim() int {
	fmt.Fprintf(os.Stderr, "%s: %s is not set; grapnel-agent starts this command for each process workload, it is not run by hand\n", progShim, process.ShimEnv)
	return 2
}

// runProgram runs the replica, the agent or the shim and returns the exit
// code; ok is false for the CLI, which main runs itself.
func runProgram(prog string, args []string) (code int, ok bool) {
	switch prog {
	case progServer:
		return servercmd.Main(args), true
	case progAgent:
		return agentcmd.Main(args), true
	case progShim:
		return runShim(), true
	}
	return 0, false
}
