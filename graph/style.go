package graph

import (
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Style is how a node is painted; DOT and SVG use the same colours.
type Style struct {
	Fill, Stroke string
	// Dashed outlines what is not (or no longer) desired: missing and
	// deleting workloads.
	Dashed bool
}

// Colours of the execution states, and of nodes that have none.
var stateStyles = map[state.ExecState]Style{
	state.StateRunning:           {Fill: "#c8e6c9", Stroke: "#2e7d32"},
	state.StatePending:           {Fill: "#fff59d", Stroke: "#f9a825"},
	state.StateSucceeded:         {Fill: "#bbdefb", Stroke: "#1565c0"},
	state.StateFailed:            {Fill: "#ffcdd2", Stroke: "#c62828"},
	state.StateStopping:          {Fill: "#ffe0b2", Stroke: "#ef6c00"},
	state.StateAgentDisconnected: {Fill: "#e0e0e0", Stroke: "#616161"},
	state.StateNotScheduled:      {Fill: "#e1bee7", Stroke: "#6a1b9a"},
	state.StateRemoved:           {Fill: "#f5f5f5", Stroke: "#9e9e9e"},
}

var (
	noStateStyle = Style{Fill: "#ffffff", Stroke: "#616161"}
	missingStyle = Style{Fill: "#ffffff", Stroke: "#c62828", Dashed: true}
)

// Colours of what is marked.
const (
	cycleColour      = "#d50000"
	deleteEdgeColour = "#9e9e9e"
	edgeColour       = "#424242"
	agentColour      = "#546e7a"
)

// StyleOf is the paint of a node: by its execution state, red dashed
// when missing, dashed when deleting.
func StyleOf(n *Node) Style {
	if n.Kind == KindMissing {
		return missingStyle
	}
	s, ok := stateStyles[state.ExecState(n.State)]
	if !ok {
		s = noStateStyle
	}
	s.Dashed = n.Kind == KindDeleting
	return s
}

// StateText is the second line of a node's label: "Running(Ok)", "no
// state", "missing".
func StateText(n *Node) string {
	switch {
	case n.Kind == KindMissing:
		return "missing"
	case n.State == "":
		return "no state"
	}
	return state.ExecutionState{State: state.ExecState(n.State), SubState: n.SubState}.Short()
}

// ConditionText is an edge's label: the condition without its prefix,
// in words ("running", "not pending nor running").
func ConditionText(c string) string {
	for _, p := range []string{"ADD_COND_", "DEL_COND_"} {
		c = strings.TrimPrefix(c, p)
	}
	return strings.ReplaceAll(strings.ToLower(c), "_", " ")
}

// tooltip is the longer text shown on hover: the workload, its kind and
// every instance's state with its additional info.
func tooltip(n *Node) string {
	var b strings.Builder
	b.WriteString(n.Name)
	switch n.Kind {
	case KindMissing:
		b.WriteString(": a dependency that names no workload")
	case KindDeleting:
		b.WriteString(": deleted, instances still present")
	}
	if n.InCycle {
		b.WriteString(" (in a dependency cycle)")
	}
	for _, i := range n.Instances {
		e := state.ExecutionState{State: state.ExecState(i.State), SubState: i.SubState, AdditionalInfo: i.AdditionalInfo}
		b.WriteString("\n" + i.Agent + ": " + e.String())
	}
	return b.String()
}
