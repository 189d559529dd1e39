// Package containerd runs workloads as containerd containers through
// nerdctl, as the Ankaios containerd runtime does, with the same
// runtimeConfig keys: `image` (required), `generalOptions` (nerdctl's
// global options, before `run`), `commandOptions` (nerdctl `run`
// options) and `commandArgs` (after the image).
//
// Options are passed through as Ankaios passes them, read as nerdctl's
// flag parser reads them, but for those that would break what the agent
// guarantees, which are refused with the field and the reason, never
// dropped: the agent chooses containerd's socket and namespace and
// nerdctl's data root and CNI directories (every later call must find
// the container where `run` put it), runs every container detached
// without --rm, --restart or a --name (nerdctl keeps a name until the
// container is removed through nerdctl, which would block the
// replacement of a container removed behind the agent's back), keeps its
// own logger and its own labels. nerdctl is pinned and built by
// scripts/containerd-setup.sh from the tools module scripts/nerdctl.
//
// A container is labelled name=<instance> and agent=<agent>, as Ankaios
// labels them; List finds an agent's containers by the agent label, so a
// restarted agent adopts the running ones. What containerd forgets, the
// runtime keeps in the container's labels too: when a task ends the
// runtime deletes it and records its exit code in grapnel.exit, since
// containerd drops the exit with the task and a stopped task does not
// survive a reboot. After a power cycle the containers are still there
// without tasks: one whose exit was recorded keeps its state (a success
// is started again in place by StartAgain, `nerdctl start`, with its
// writable layer), one that ran at the cut has neither task nor exit and
// is Failed(Lost), which the agent replaces. A task deleted behind the
// agent's back reads the same, a container removed behind its back is
// runtime.ErrNotFound: the agent's drift repair acts on both.
//
// ctr, containerd's own CLI, does what nerdctl cannot: it reaps a task
// and keeps the container (`ctr tasks delete`, whose warning carries the
// exit code), and changes a container's labels (grapnel.exit, and the
// log path and nerdctl's log URI before a StartAgain). The reads stay on
// ctr too (`containers ls`, `containers info`, `tasks ls`): `nerdctl ps`
// reads every container's spec and image for each look, and prints
// labels joined by commas, which a value holding one makes ambiguous.
// State shares one look, at most 500 ms old, among the pollers of all
// instances.
//
// The output is logged by the agent's own binary, which containerd's
// shim runs as the container's logger (nerdctl's --log-driver takes the
// `binary://` log URI, RunLoggerIfRequested): every line of stdout and
// stderr, in the order they come, with its time, into <run
// dir>/containerd.log (named by the grapnel.log label), in the process
// runtime's format. So Logs honours Tail, Since, Until and Follow as the
// process runtime does. The logger holds a lock on the log until both
// streams ended, which tells a following reader that the log is
// complete.
//
// scripts/containerd-setup.sh installs containerd and the CNI plugins,
// builds nerdctl and the offline test image; containerdtest starts a
// private containerd, with nerdctl's data root, CNI configuration and a
// default network of its own, for the tests.
package containerd
