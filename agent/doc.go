// Package agent is grapnel-agent: it connects to the server over the
// Ankaios agent stream, announces itself with AgentHello, reports its CPU
// usage and free memory every two seconds, and reconciles the workloads
// the server assigns to it.
//
// This first cut has the connection, reconnection and load reporting but
// no runtime yet: every workload is answered, as Ankaios answers a
// workload whose runtime the agent does not have, with
// Pending(StartingFailed) and the reason, and deletions with Removed. The
// process and podman runtimes come with the agent issue.
package agent
