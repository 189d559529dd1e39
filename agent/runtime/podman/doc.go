// Package podman runs workloads as podman containers, as the Ankaios podman
// runtime does, by calling the podman CLI.
//
// The runtimeConfig is YAML with the Ankaios keys: `image` (required),
// `generalOptions` (podman options before `run`), `commandOptions`
// (options of `podman run`) and `commandArgs` (after the image). Unlike
// Ankaios, unknown keys are refused, so that a misspelt key is a clear
// Pending(StartingFailed) instead of an option silently dropped.
//
// A container is named after its instance (<workload>.<id>.<agent>) and
// labelled name=<instance> and agent=<agent>. Those labels are all the
// runtime needs to find its containers again after an agent restart: List
// asks podman for the agent's label, so running containers are adopted,
// never recreated. After a power cycle podman itself marks every
// container that ran in the earlier boot Exited; StartAgain starts one
// that exited successfully again in place (`podman start`, the container
// keeps its writable layer), as Ankaios does. Workload files are bind-mounted read-only at their
// mount points, the control interface directory read-write at
// /run/ankaios/control_interface.
//
// State shares one `podman ps --all` answer, at most a second old, among
// the pollers of all instances (as Ankaios does); Create and Delete make
// older answers stale, and a container is only reported gone after an
// answer taken since the question was asked.
//
// The same package holds the podman-kube runtime (KubeRuntime, kube*.go),
// as the Ankaios podman-kube runtime: a Kubernetes manifest played with
// `podman kube play` and taken down with `podman kube down`. It shares
// the podman runtime's binary and `podman ps --all` answers, so both
// kinds of workload cost one podman call a second between them. What a
// restarted agent needs (the pods, what kube down reads) is kept, as
// Ankaios keeps it, in the label of two volumes per instance,
// <instance>.config and <instance>.pods.
//
// scripts/podman-setup.sh installs and configures podman on a Debian host
// and builds the offline test image localhost/grapnel-busybox:latest.
package podman
