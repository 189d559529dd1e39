// Package powercycle tests what the agent does at its start with the
// workloads it finds on the host, with the real runtimes: after an agent
// restart and after a power cycle of the whole system.
//
// The rules are upstream Ankaios's, applied per instance the server wants:
// running under the same instance name → resumed (same pid, same
// container); succeeded → started again (podman: the same container);
// failed, lost or never started → replaced; from another instance name
// (a changed spec) → replaced; not found → created. A power cycle ends
// every workload: the process runtime recognises processes of an earlier
// boot by the kernel's boot id and by their start times, and podman marks
// the containers that ran then Exited.
//
// The tests simulate a reboot by changing the process runtime's boot id
// file between two agents on one run folder and killing the workloads
// with SIGKILL, shim first, so that no exit is recorded. The end-to-end
// test runs a grapnel-server and a grapnel-agent built from this module
// as pid 1's children in a pid namespace of their own (unshare) and cuts
// the power by killing that pid 1: the kernel kills everything inside at
// once. It is skipped where unshare is not permitted.
package powercycle
