package process

import "github.com/grapnel-io/grapnel/agent/runtime/process/shim"

// ShimEnv is the environment variable that turns an executable into a
// shim; its value is the record directory of the instance.
const ShimEnv = shim.Env

// ShimCommand is the name of the shim's own command: the runtime starts
// the one next to the agent's executable when there is one.
const ShimCommand = "grapnel-process-shim"

// maxLine is the longest line the shim logs.
const maxLine = shim.MaxLine

// RunShimIfRequested runs the shim and exits when the process was started
// as one (ShimEnv is set); otherwise it returns at once. It must be the
// first call in main, and in TestMain of every package whose tests start
// workloads through this runtime.
func RunShimIfRequested() { shim.RunIfRequested() }

// checkExecutable checks that path is a file with an execute bit.
func checkExecutable(path string) error { return shim.CheckExecutable(path) }
