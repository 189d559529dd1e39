package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteDOT writes g in the Graphviz DOT language: one cluster per agent
// (subgraph cluster_<agent>), dependencies drawn upwards from a workload
// to what it waits for, delete-graph edges dashed and left out of the
// ranking, cycles in red. `dot -Tsvg` draws it.
func WriteDOT(w io.Writer, g *Graph) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "// grapnel dependency graph (format version %d).\n", g.Version)
	b.WriteString("// Solid edges: a workload waits for its dependency's condition before it starts.\n")
	b.WriteString("// Dashed edges: deleting a workload waits for its dependent's condition.\n")
	b.WriteString("digraph grapnel {\n")
	b.WriteString("  graph [rankdir=BT, fontname=\"Helvetica\", fontsize=11, newrank=true];\n")
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprintf(b, "  edge [fontname=\"Helvetica\", fontsize=9, color=%s, fontcolor=%s];\n", quote(edgeColour), quote(edgeColour))

	placed := map[string]bool{}
	for _, a := range g.Agents {
		label := a.Name
		if !a.Connected {
			label += " (not connected)"
		}
		fmt.Fprintf(b, "  subgraph %s {\n", quote("cluster_"+a.Name))
		fmt.Fprintf(b, "    label=%s; labelloc=\"t\"; style=\"rounded\"; color=%s; fontcolor=%s;\n", quote(label), quote(agentColour), quote(agentColour))
		for _, name := range a.Workloads {
			if n := g.Node(name); n != nil {
				writeDOTNode(b, "    ", n)
				placed[name] = true
			}
		}
		b.WriteString("  }\n")
	}
	for i := range g.Nodes {
		if !placed[g.Nodes[i].Name] {
			writeDOTNode(b, "  ", &g.Nodes[i])
		}
	}
	for _, e := range g.Edges {
		attrs := []string{"label=" + quote(ConditionText(e.Condition))}
		switch {
		case e.Kind == EdgeDelete:
			attrs = append(attrs, "style=dashed", "color="+quote(deleteEdgeColour), "fontcolor="+quote(deleteEdgeColour), "constraint=false")
		case e.InCycle:
			attrs = append(attrs, "color="+quote(cycleColour), "fontcolor="+quote(cycleColour), "penwidth=2")
		case e.Missing:
			attrs = append(attrs, "style=dashed", "color="+quote(missingStyle.Stroke))
		}
		fmt.Fprintf(b, "  %s -> %s [%s];\n", quote(e.From), quote(e.To), strings.Join(attrs, ", "))
	}
	b.WriteString("}\n")
	return b.Flush()
}

func writeDOTNode(b *bufio.Writer, indent string, n *Node) {
	s := StyleOf(n)
	style := "rounded,filled"
	if s.Dashed {
		style += ",dashed"
	}
	stroke, pen := s.Stroke, "1"
	if n.InCycle {
		stroke, pen = cycleColour, "2"
	}
	if n.Changed {
		style += ",bold"
		pen = "3"
	}
	fmt.Fprintf(b, "%s%s [label=%s, style=%s, fillcolor=%s, color=%s, penwidth=%s, tooltip=%s];\n",
		indent, quote(n.Name), quoteLines(n.Name, StateText(n)), quote(style), quote(s.Fill), quote(stroke), pen, quote(tooltip(n)))
}

// quote makes s a DOT double-quoted string. In DOT only \" is an escape
// inside quotes; a backslash is kept and, in labels, starts an escape of
// its own (\n, \l, \N), so it is doubled. A newline becomes \n.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}

// quoteLines is a label of several centred lines.
func quoteLines(lines ...string) string {
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = strings.TrimSuffix(strings.TrimPrefix(quote(l), `"`), `"`)
	}
	return `"` + strings.Join(q, `\n`) + `"`
}
