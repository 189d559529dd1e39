// Package netns turns one Linux machine into a small network of test hosts
// for Grapnel's chaos runs: N host namespaces and one client namespace, each
// with a veth pair on a private bridge, addresses from an RFC 1918 test
// subnet and a default route via the bridge address.
//
// Processes start inside a host with Command (nsenter, so podman keeps its
// cgroups). Faults are iptables rules applied only inside the namespaces, in
// dedicated chains that Heal flushes: Partition, OneWay, Isolate and Loss
// drop packets by peer address; Delay adds latency through a userspace TCP
// proxy, since the kernel has no netem here.
//
// Safety comes first: every address is inside the configured private
// subnet, CheckRoute refuses an address whose route from the root namespace
// does not use the bridge, and a guard chain in every namespace rejects
// anything leaving it for an address outside the subnet, so no test traffic
// can reach another network even though the namespaces have a default
// route. Close removes everything Setup created; CleanLeftovers does the
// same by name after a crash, and Setup calls it first.
package netns
