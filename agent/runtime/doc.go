// Package runtime is the seam between the agent's workload control loops
// and the programs that run workloads: the process runtime
// (agent/runtime/process), podman and podman-kube (agent/runtime/podman)
// and containerd (agent/runtime/containerd).
//
// A Runtime is stateless from the agent's point of view: everything it
// needs to find an instance again after an agent restart is on the host
// (a process's record under the run folder, a container's labels), so
// List can hand running instances back for adoption.
package runtime
