// Package process is the `process` runtime: a workload is a plain child
// process, started from a YAML runtimeConfig (command, args, env,
// workingDir), that outlives the agent.
//
// The agent does not start the workload itself. As conmon does for podman,
// Create starts a small shim (package shim) in its own session, with its
// standard streams on files: the command grapnel-process-shim next to the
// agent's executable, or without one the agent's own executable re-entered
// through RunShimIfRequested (Config.Shim). The shim starts the workload in its own process group,
// appends every line of its stdout and stderr with a timestamp to a log
// file, forwards SIGTERM and SIGINT to it, reaps it and records how it
// ended. The agent holds no pipe to either of them once Create returned
// (the shim closes the one Create waits on, shim.ReadyEnv, as soon as it
// recorded the workload's pid), so an agent that crashes, restarts or is
// killed with its process group leaves the workload running, and a
// restarted agent adopts it by reading the record.
//
// The record is the directory <run folder>/<agent>_io/<instance>/process/:
//
//	spec.json    what to start, and the boot (written by Create before
//	             the shim starts)
//	shim.json    the shim's pid, start time and boot (written by Create)
//	record.json  the workload's pid, start time and boot (by the shim)
//	start-error  why the workload could not be started (written by the shim)
//	exit         how the workload ended: exit code or signal (by the shim)
//	output.log   "<RFC3339Nano> <stdout|stderr> <line>" per output line
//	shim.log     the shim's own diagnostics
//
// The record directory is the agent's alone (0700): spec.json holds the
// rendered environment. The workload runs under a user of its own
// (users.go: a uid of Config.UIDs kept per workload name, or the user its
// runtimeConfig names), with the allow-listed environment of package
// shim, in <run folder>/<agent>_io/<instance>/work, its HOME, 0700 and
// its own; the directories above are the agent's, passable by the
// workload's group only (see runtime.PrepareRunDir).
//
// Every JSON file is written to a temporary name and renamed, so a reader
// never sees half of one. spec.json, exit and start-error are synced
// (internal/durable); shim.json and record.json, which name processes a
// power cut ends, are not, so that a start does not wait for them, and
// what a cut leaves of them the next agent takes for no record
// (readRecords). A pid is only trusted together with its start
// time (field 22 of /proc/<pid>/stat, clock ticks since boot) and the
// kernel's boot id (Config.BootIDFile), so that neither a pid reused in
// the same boot nor one of a later boot — where the same pid and even the
// same start time may name an unrelated process — is taken for the
// workload or signalled. The boot id is what tells boots apart on a run
// folder that survives a power cycle; the start time alone still does it
// in a pid namespace (which shares the kernel's boot id) and for records
// written before boot ids were kept. A run folder on tmpfs is simply
// empty after a reboot.
package process
