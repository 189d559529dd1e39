package graph

import (
	"cmp"
	"slices"

	"github.com/grapnel-io/grapnel/state"
)

// Input is what a graph is built from.
type Input struct {
	// Workloads are the desired state's workloads.
	Workloads map[string]*state.Workload
	// Agents maps a workload to its rendered agent name, for workloads
	// whose agent field is a template ("{{node.agent}}"). A workload it
	// does not name is drawn on its agent field as it is.
	Agents map[string]string
	// States are the instances' execution states.
	States state.WorkloadStatesMap
	// Connected are the names of the connected agents.
	Connected []string
	// DeleteGraph is the server's delete graph. Nil derives it from the
	// workloads' dependencies as the server does when it stores them
	// (state.DeleteGraph.Insert), which is what a client that sees only
	// the complete state can do.
	DeleteGraph state.DeleteGraph
}

// Build makes the graph of in.
//
// Nodes are sorted by name; edges by kind (dependency first), From, To;
// agents by name; each agent's workloads by name. A node's State is that
// of one of its instances: those on the node's agent come first, among
// them one that is not Stopping or Removed (the instance replacing an old
// one), then the smallest instance id.
func Build(in Input) *Graph {
	g := &Graph{Version: Version, Agents: []Agent{}, Nodes: []Node{}, Edges: []Edge{}, Cycles: [][]string{}}
	instances := instancesByWorkload(in.States)

	nodes := map[string]*Node{}
	for name, w := range in.Workloads {
		agent := w.Agent
		if a, ok := in.Agents[name]; ok {
			agent = a
		}
		nodes[name] = &Node{Name: name, Kind: KindWorkload, Agent: agent, Runtime: w.Runtime}
	}
	for name, is := range instances {
		if nodes[name] == nil {
			nodes[name] = &Node{Name: name, Kind: KindDeleting, Agent: is[0].Agent}
		}
		nodes[name].Instances = is
	}
	addMissing := func(name string) {
		if nodes[name] == nil {
			nodes[name] = &Node{Name: name, Kind: KindMissing}
		}
	}

	for name, w := range in.Workloads {
		for dep, cond := range w.Dependencies {
			addMissing(dep)
			g.Edges = append(g.Edges, Edge{Kind: EdgeDependency, From: name, To: dep, Condition: string(cond), Missing: nodes[dep].Kind == KindMissing})
		}
	}
	dg := in.DeleteGraph
	if dg == nil {
		dg = state.DeleteGraph{}
		for name, w := range in.Workloads {
			dg.Insert(name, w)
		}
	}
	// A delete edge is drawn only between workloads that are desired or
	// still have instances: deleting what does not exist waits for
	// nothing (a dependency on a missing workload puts it in the delete
	// graph all the same), and a dependent that is gone holds nothing up.
	exists := func(name string) bool { return nodes[name] != nil && nodes[name].Kind != KindMissing }
	for dep, dependents := range dg {
		if !exists(dep) {
			continue
		}
		for dependent, cond := range dependents {
			if !exists(dependent) {
				continue
			}
			g.Edges = append(g.Edges, Edge{Kind: EdgeDelete, From: dep, To: dependent, Condition: string(cond)})
		}
	}

	for _, name := range state.SortedKeys(nodes) {
		n := nodes[name]
		setState(n)
		g.Nodes = append(g.Nodes, *n)
	}
	slices.SortFunc(g.Edges, compareEdges)
	markCycles(g)
	g.Agents = agents(g.Nodes, in.Connected)
	return g
}

// FromStore is the input of a replica's graph, built from its store: the
// desired state, the agents as rendered, the workload states, the
// connected agents and the replicated delete graph, which, unlike the one
// a client derives, still holds the entries of deleted workloads whose
// instances are stopping.
func FromStore(st *state.Store) Input {
	agents := make(map[string]string, len(st.Rendered))
	for name, r := range st.Rendered {
		if r.Instance.AgentName != "" {
			agents[name] = r.Instance.AgentName
		}
	}
	return Input{
		Workloads:   st.Desired.Workloads,
		Agents:      agents,
		States:      st.States,
		Connected:   state.SortedKeys(st.Agents),
		DeleteGraph: st.DeleteGraph,
	}
}

// instancesByWorkload lists each workload's instances, sorted by agent and
// id.
func instancesByWorkload(m state.WorkloadStatesMap) map[string][]Instance {
	out := map[string][]Instance{}
	for _, ws := range m.All() {
		e := ws.State
		out[ws.Instance.WorkloadName] = append(out[ws.Instance.WorkloadName], Instance{
			Agent: ws.Instance.AgentName, ID: ws.Instance.ID,
			State: string(e.State), SubState: e.SubState, AdditionalInfo: e.AdditionalInfo,
		})
	}
	for _, is := range out {
		slices.SortFunc(is, func(a, b Instance) int {
			return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.ID, b.ID))
		})
	}
	return out
}

// setState picks the instance whose state colours the node (see Build).
func setState(n *Node) {
	var best *Instance
	rank := func(i *Instance) int {
		r := 0
		if i.Agent != n.Agent {
			r += 2
		}
		if i.State == string(state.StateStopping) || i.State == string(state.StateRemoved) {
			r++
		}
		return r
	}
	for i := range n.Instances {
		// Instances are sorted by agent and id, so the first of the
		// best rank has the smallest id among them.
		if in := &n.Instances[i]; best == nil || rank(in) < rank(best) {
			best = in
		}
	}
	if best != nil {
		n.State, n.SubState, n.AdditionalInfo = best.State, best.SubState, best.AdditionalInfo
	}
}

func compareEdges(a, b Edge) int {
	return cmp.Or(cmp.Compare(edgeKindOrder(a.Kind), edgeKindOrder(b.Kind)), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
}

func edgeKindOrder(k EdgeKind) int {
	if k == EdgeDependency {
		return 0
	}
	return 1
}

// agents groups the nodes by agent. Nodes without an agent belong to no
// group.
func agents(nodes []Node, connected []string) []Agent {
	byName := map[string]*Agent{}
	get := func(name string) *Agent {
		a := byName[name]
		if a == nil {
			a = &Agent{Name: name, Workloads: []string{}}
			byName[name] = a
		}
		return a
	}
	for _, c := range connected {
		get(c).Connected = true
	}
	for _, n := range nodes {
		for _, i := range n.Instances {
			get(i.Agent)
		}
		if n.Agent != "" {
			a := get(n.Agent)
			a.Workloads = append(a.Workloads, n.Name)
		}
	}
	out := make([]Agent, 0, len(byName))
	for _, name := range state.SortedKeys(byName) {
		out = append(out, *byName[name])
	}
	return out
}

// markCycles finds the strongly connected components of the dependency
// edges (Tarjan's algorithm, visiting nodes and edges in their sorted
// order) and marks every node and dependency edge inside one that is a
// cycle: more than one workload, or a workload depending on itself.
func markCycles(g *Graph) {
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n.Name] = i
	}
	succ := make([][]int, len(g.Nodes))
	self := make([]bool, len(g.Nodes))
	for _, e := range g.Edges {
		if e.Kind != EdgeDependency {
			continue
		}
		f, t := index[e.From], index[e.To]
		succ[f] = append(succ[f], t)
		if f == t {
			self[f] = true
		}
	}

	comp := make([]int, len(g.Nodes))
	low := make([]int, len(g.Nodes))
	order := make([]int, len(g.Nodes)) // 0: not visited; else visit order + 1
	onStack := make([]bool, len(g.Nodes))
	var stack []int
	next, ncomp := 1, 0
	var visit func(v int)
	visit = func(v int) {
		order[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range succ[v] {
			switch {
			case order[w] == 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], order[w])
			}
		}
		if low[v] != order[v] {
			return
		}
		var members []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp[w] = ncomp
			members = append(members, w)
			if w == v {
				break
			}
		}
		ncomp++
		if len(members) > 1 || self[v] {
			var names []string
			for _, m := range members {
				g.Nodes[m].InCycle = true
				names = append(names, g.Nodes[m].Name)
			}
			slices.Sort(names)
			g.Cycles = append(g.Cycles, names)
		}
	}
	for v := range g.Nodes {
		if order[v] == 0 {
			visit(v)
		}
	}
	for i, e := range g.Edges {
		if e.Kind == EdgeDependency {
			f, t := index[e.From], index[e.To]
			g.Edges[i].InCycle = comp[f] == comp[t] && g.Nodes[f].InCycle
		}
	}
	slices.SortFunc(g.Cycles, slices.Compare)
}
