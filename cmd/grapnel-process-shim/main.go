// Command grapnel-process-shim is the process runtime's shim: grapnel-agent
// starts one per process workload, as
//
//	grapnel-process-shim grapnel-process-shim <instance>
//
// with GRAPNEL_PROCESS_SHIM set to the instance's record directory. It
// starts the workload, logs its output, forwards SIGTERM and SIGINT to it
// and records how it ended, exactly as grapnel-agent does when started the
// same way; the agent uses this command when it is installed next to the
// agent's executable. It is built from package shim alone, a fraction of
// the agent's size, so that it starts with a fraction of the CPU: at a
// vehicle's power-on every process workload starts a shim at once.
package main

import (
	"fmt"
	"os"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
)

func main() {
	shim.RunIfRequested()
	fmt.Fprintf(os.Stderr, "grapnel-process-shim: %s is not set; grapnel-agent starts this command for each process workload, it is not run by hand\n", shim.Env)
	os.Exit(2)
}
