// Package containerd runs workloads as containerd containers, as the
// Ankaios containerd runtime does, with the same runtimeConfig keys:
// `image` (required), `generalOptions`, `commandOptions` (nerdctl `run`
// options) and `commandArgs` (after the image).
//
// Ankaios drives containerd through nerdctl. nerdctl is neither a Debian
// package on the machines Grapnel is built and tested on nor served by
// the Go module proxy, so this runtime drives containerd's own CLI, ctr,
// which ships with Debian's containerd: commandOptions are read as
// nerdctl reads them and translated into `ctr run` options. Only options
// with a ctr counterpart are accepted (--env/-e, --workdir/-w,
// --network/--net host|none, --volume/-v and --mount of host paths,
// --cap-add, --cap-drop, --label/-l, --memory/-m, --cpus, --privileged,
// --read-only); any other, and any generalOptions (the agent chooses
// containerd's socket and namespace), is refused with the field and the
// reason, never dropped. Every container gets containerd's default
// seccomp profile, as under nerdctl. Unlike nerdctl there is no network
// but the loopback interface unless --network host is given.
//
// A container is labelled name=<instance> and agent=<agent>, as Ankaios
// labels them, under a random id; List finds an agent's containers by the
// agent label, so a restarted agent adopts the running ones. What
// containerd forgets, the runtime keeps in the container's labels too:
// when a task ends the runtime deletes it and records its exit code in
// grapnel.exit, since containerd drops the exit with the task and a
// stopped task does not survive a reboot. After a power cycle the
// containers are still there without tasks: one whose exit was recorded
// keeps its state (a success is started again in place by StartAgain,
// `ctr tasks start`, with its writable layer), one that ran at the cut
// has neither task nor exit and is Failed(Lost), which the agent
// replaces. A task deleted behind the agent's back reads the same, a
// container removed behind its back is runtime.ErrNotFound: the agent's
// drift repair acts on both.
//
// The output is logged by the agent's own binary, which containerd's
// shim runs as the container's logger (a `binary://` log URI,
// RunLoggerIfRequested): every line of stdout and stderr, in the order
// they come, with its time, into <run dir>/containerd.log (named by the
// grapnel.log label), in the process runtime's format. So Logs honours
// Tail, Since, Until and Follow as the process runtime does. The logger
// holds a lock on the log until both streams ended, which tells a
// following reader that the log is complete.
//
// State shares one look at containerd (`ctr containers ls` and `ctr tasks
// ls`), at most 500 ms old, among the pollers of all instances.
//
// scripts/containerd-setup.sh installs containerd and builds the offline
// test image; containerdtest starts a private containerd for the tests.
package containerd
