// Package workloadpolicy is the admission policy for what a workload may
// run: the levels of Kubernetes' Pod Security Standards (privileged,
// baseline, restricted) applied to Grapnel's runtimes. It reads a
// workload's runtime and rendered runtimeConfig — the `user:` of a
// process workload, the podman options (generalOptions, commandOptions)
// as podman's own flag parser reads them (containerd's commandOptions
// alike: the runtime accepts only options podman's run has), podman-kube's
// playOptions and the security fields of its Kubernetes manifest — and lists every
// setting that grants more than a default container or process has, or
// restricts it, with the least level that admits it.
//
// The agent enforces its --workload-policy before it starts a workload,
// the server checks its own --workload-policy when an update adds or
// changes one, and package access uses the settings to decide whether a
// write through the control interface or a commander's write widens a
// workload's privileges. All three therefore read a runtimeConfig alike.
//
// The package is pure: no time, no I/O (a user name is never resolved
// here; the process runtime does that), no state of its own.
package workloadpolicy
