package graph

import (
	"fmt"
	"slices"
)

// Focus returns the part of g that concerns the named workloads: them,
// everything they depend on and everything that depends on them, both
// transitively, with the edges among those and the agents that hold them.
// A name that is not a node of g is an error.
func (g *Graph) Focus(names []string) (*Graph, error) {
	keep := map[string]bool{}
	deps := map[string][]string{}
	dependents := map[string][]string{}
	for _, e := range g.Edges {
		if e.Kind == EdgeDependency {
			deps[e.From] = append(deps[e.From], e.To)
			dependents[e.To] = append(dependents[e.To], e.From)
		}
	}
	walk := func(start string, next map[string][]string) {
		seen := map[string]bool{}
		todo := []string{start}
		for len(todo) > 0 {
			n := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[n] {
				continue
			}
			seen[n] = true
			keep[n] = true
			todo = append(todo, next[n]...)
		}
	}
	for _, n := range names {
		if g.Node(n) == nil {
			return nil, fmt.Errorf("workload '%s' is not in the graph", n)
		}
		walk(n, deps)
		walk(n, dependents)
	}

	out := &Graph{Version: g.Version, Agents: []Agent{}, Nodes: []Node{}, Edges: []Edge{}, Cycles: [][]string{}}
	for _, n := range g.Nodes {
		if keep[n.Name] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, e := range g.Edges {
		if keep[e.From] && keep[e.To] {
			out.Edges = append(out.Edges, e)
		}
	}
	for _, c := range g.Cycles {
		if keep[c[0]] {
			out.Cycles = append(out.Cycles, c)
		}
	}
	for _, a := range g.Agents {
		a.Workloads = slices.DeleteFunc(slices.Clone(a.Workloads), func(w string) bool { return !keep[w] })
		if len(a.Workloads) > 0 {
			out.Agents = append(out.Agents, a)
		}
	}
	return out, nil
}
