// Package upgrade is the rolling-upgrade test (`make upgrade-test`,
// issue 28, docs/upgrade.md): it builds the previous release named in
// .ci/previous-release from git and this tree, starts three replicas and
// three agents of the previous release with process and podman workloads
// and writers covering every request kind, and moves every replica and
// agent to the new build one at a time (SIGTERM, the other build on the
// same data dir), back to the previous one, forward again, then
// finalizes and checks that a rollback is refused.
//
// After every step it checks that no workload restarted (same pids and
// container ids), no acknowledged write was lost, the history is
// linearizable, every replica is a healthy voter, every route (leader-
// aware, and through each replica) serves, the probes of every request
// kind pass through the CLI of both releases, and at the end that all
// replicas hold the same state. The report (markdown and JSON) lists each
// step's figures and every incompatibility found, with the log lines
// around it.
package upgrade
