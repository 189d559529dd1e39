package graph

import (
	"slices"
	"strings"
)

// Version is the version of the JSON form. It is raised only when a field
// is renamed or removed or changes its meaning; new fields keep it.
const Version = 1

// Graph is the dependency graph of the workloads. Agents, Nodes, Edges and
// Cycles are sorted (see Build), so that two builds of one state are
// equal.
type Graph struct {
	Version int `json:"version"`
	// Agents are the groups of the drawing: every agent a workload is
	// assigned to, has an instance on, or that is connected.
	Agents []Agent `json:"agents"`
	Nodes  []Node  `json:"nodes"`
	Edges  []Edge  `json:"edges"`
	// Cycles lists each set of workloads whose dependencies form a cycle,
	// each sorted by name. The server refuses such a state, so this is
	// empty unless the graph was built from a state no server accepted.
	Cycles [][]string `json:"cycles"`
}

// Agent is one agent and the workloads drawn in its group.
type Agent struct {
	Name string `json:"name"`
	// Connected says the agent is in the complete state's agent map.
	Connected bool `json:"connected"`
	// Workloads are the names of the nodes whose Agent is this one.
	Workloads []string `json:"workloads"`
}

// Kind says why a node is in the graph.
type Kind string

// Node kinds.
const (
	// KindWorkload is a workload of the desired state.
	KindWorkload Kind = "workload"
	// KindDeleting is a workload no longer desired that still has an
	// instance (it is being stopped, or its agent has not reported it
	// removed yet).
	KindDeleting Kind = "deleting"
	// KindMissing is a name a dependency (or the delete graph) refers to
	// that is neither desired nor has an instance: the workloads that
	// depend on it wait for it forever.
	KindMissing Kind = "missing"
)

// Node is one workload.
type Node struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Agent is the agent the workload is assigned to (the rendered agent
	// field); for a deleting workload, the agent of its first instance;
	// empty for a missing one or a workload assigned to no agent.
	Agent   string `json:"agent,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	// State, SubState and AdditionalInfo are the execution state the node
	// is coloured by (see Build); empty when no instance has a state.
	State          string `json:"state,omitempty"`
	SubState       string `json:"subState,omitempty"`
	AdditionalInfo string `json:"additionalInfo,omitempty"`
	// Instances are all instances of the workload with a state, sorted by
	// agent and id.
	Instances []Instance `json:"instances,omitempty"`
	// InCycle marks a workload whose dependencies lead back to it.
	InCycle bool `json:"inCycle,omitempty"`
	// Changed marks a workload the transaction a graph is drawn at
	// changed (get graph --txn N).
	Changed bool `json:"changed,omitempty"`
}

// Instance is one instance of a workload and its execution state.
type Instance struct {
	Agent          string `json:"agent"`
	ID             string `json:"id"`
	State          string `json:"state"`
	SubState       string `json:"subState"`
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

// EdgeKind tells dependency edges from delete-graph edges.
type EdgeKind string

// Edge kinds.
const (
	// EdgeDependency: From starts only once To has reached Condition
	// (ADD_COND_RUNNING, ADD_COND_SUCCEEDED or ADD_COND_FAILED).
	EdgeDependency EdgeKind = "dependency"
	// EdgeDelete: deleting From waits until To, a workload that depends
	// on it, is in Condition (DEL_COND_NOT_PENDING_NOR_RUNNING or
	// DEL_COND_RUNNING).
	EdgeDelete EdgeKind = "delete"
)

// Edge is a dependency or a delete-graph entry.
type Edge struct {
	Kind      EdgeKind `json:"kind"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Condition string   `json:"condition"`
	// Missing marks a dependency edge whose To is a missing node.
	Missing bool `json:"missing,omitempty"`
	// InCycle marks a dependency edge between two workloads of one cycle.
	InCycle bool `json:"inCycle,omitempty"`
}

// Node returns the node of a name, or nil. The nodes must be sorted by
// name, as Build and Focus leave them.
func (g *Graph) Node(name string) *Node {
	i, ok := slices.BinarySearchFunc(g.Nodes, name, func(n Node, name string) int { return strings.Compare(n.Name, name) })
	if !ok {
		return nil
	}
	return &g.Nodes[i]
}
