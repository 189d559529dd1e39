// Command grapnel-agent is the agent alone (package agentcmd). The
// install is the multi-call binary grapnel with grapnel-agent a link to
// it (cmd/grapnel); this command is for `go install` of the one role and
// for scripts that build it by this name.
package main

import (
	"os"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/cmd/internal/agentcmd"
)

func main() {
	// Without grapnel-process-shim next to this binary, a workload process
	// is started through this binary as its shim.
	process.RunShimIfRequested()
	// containerd's shim runs this binary as the logger of every
	// containerd workload.
	containerd.RunLoggerIfRequested()
	os.Exit(agentcmd.Main(os.Args[1:]))
}
