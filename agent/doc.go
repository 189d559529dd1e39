// Package agent is grapnel-agent: it runs the workloads the server assigns
// to it, as the Ankaios agent does, and keeps following the leader of a
// Grapnel cluster.
//
// Run keeps one rpc/client Resolver for the agent's life and one agent
// stream at a time, opened at the leader. It announces the agent with
// AgentHello (name, tags, protocol version and an incarnation that grows
// with every start of the agent), hands ServerHello and UpdateWorkload to
// the workload Manager, the other agents' states to it for dependencies,
// answers to the control interfaces and log requests to the log
// campaigns. When the stream breaks, or the leader moves (the stream's
// heartbeat says so, or the replicas' gossip names another leader), the
// agent opens a new one at once; the Resolver backs off only while no
// leader is known. A protocol-version refusal ends Run, as it ends the
// Ankaios agent.
//
// Workloads never depend on the stream: while no replica can be reached
// they keep running, and the Manager's state changes are kept, the newest
// per instance, to be reported after the next ServerHello together with
// every instance's current state, which a new leader may have missed.
// Every report carries a generation that grows with every report of the
// incarnation, so the replicas can drop stale ones.
//
// CPU usage and free memory are reported every two seconds while
// connected. With GossipJoin the agent joins the replicas' memberlist pool
// as a member of role agent and learns every replica's gRPC address and
// the leader they see.
package agent
