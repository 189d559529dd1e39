// Package e2e holds end-to-end tests with real binaries: grapnel-server
// replicas, grapnel-agent processes and the grapnel CLI on loopback. They
// prove the point of Grapnel: a replica failure, an agent restart or an
// agent cut off for a while never restarts a workload.
//
// The podman parts run when scripts/podman-setup.sh has prepared the
// machine; with GRAPNEL_REQUIRE_PODMAN=1 (as .ci/run sets) a machine
// without podman fails the tests instead of skipping those parts.
package e2e
