package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

var agentHeaders = []string{"NAME", "WORKLOADS", "CPU USAGE", "FREE MEMORY"}

// modeHeader and releaseHeader are the columns Grapnel adds to `get
// agents`: the agent's mode (docs/placement.md) and the release its hello
// announced (docs/operations.md). Each is shown when the server told it
// (a Grapnel one).
const (
	modeHeader    = "MODE"
	releaseHeader = "RELEASE"
)

// AgentRow is one line of the agents table. CPU and FreeMemory are empty
// until the agent has sent its first load report. Mode and Release are
// empty when the server told none (an Ankaios server, or a Grapnel one
// older than releases for Release).
type AgentRow struct {
	Name       string
	Workloads  int
	CPU        string
	FreeMemory string
	Mode       string
	Release    string
	// cpu and free are the load report's figures, for -o json and yaml.
	cpu, free *uint64
}

// AgentRows builds the rows of `get agents` from a complete-state tree:
// every connected agent, with the number of workload instances it has a
// state for, its CPU usage as "N%" and its free memory as "NB".
// swdd~cli-processes-complete-state-to-provide-connected-agents~1
func AgentRows(cs state.Tree) []AgentRow {
	counts := map[string]int{}
	for _, ws := range workloadStates(cs) {
		counts[ws.Instance.AgentName]++
	}
	agents := node(cs, "agents")
	rows := make([]AgentRow, 0, len(agents))
	for _, name := range state.SortedKeys(agents) {
		r := AgentRow{Name: name, Workloads: counts[name]}
		st := node(agents, name, "status")
		if n, ok := num(st, "cpuUsage"); ok {
			r.CPU = strconv.FormatUint(n, 10) + "%"
			r.cpu = &n
		}
		if n, ok := num(st, "freeMemory"); ok {
			r.FreeMemory = strconv.FormatUint(n, 10) + "B"
			r.free = &n
		}
		rows = append(rows, r)
	}
	return rows
}

// WithModes fills in the agents' modes: Active unless modes says
// otherwise. An agent with a mode that is not connected gets a row of its
// own, marked disconnected, so that an agent in maintenance while it
// reboots is not forgotten.
func WithModes(rows []AgentRow, cs state.Tree, modes map[string]string) []AgentRow {
	seen := map[string]bool{}
	for i := range rows {
		seen[rows[i].Name] = true
		rows[i].Mode = "Active"
		if m, ok := modes[rows[i].Name]; ok {
			rows[i].Mode = m
		}
	}
	counts := map[string]int{}
	for _, ws := range workloadStates(cs) {
		counts[ws.Instance.AgentName]++
	}
	for _, name := range state.SortedKeys(modes) {
		if !seen[name] {
			rows = append(rows, AgentRow{Name: name, Workloads: counts[name], Mode: modes[name] + " (disconnected)"})
		}
	}
	return rows
}

// noRelease is the release shown for an agent the leader knows no
// release of: connected before this leader was elected and not yet
// reconnected to it, or disconnected.
const noRelease = "-"

// WithReleases fills in the releases the leader knows (name → release,
// as grapnel.Cluster.Agents answers them); an agent it knows none of
// shows noRelease.
func WithReleases(rows []AgentRow, releases map[string]string) []AgentRow {
	for i := range rows {
		rows[i].Release = noRelease
		if r, ok := releases[rows[i].Name]; ok && r != "" {
			rows[i].Release = r
		}
	}
	return rows
}

// AgentTable lays out rows under the ank headers, and the mode and the
// release when the rows have them.
func AgentTable(rows []AgentRow) Table {
	withMode, withRelease := false, false
	for _, r := range rows {
		withMode = withMode || r.Mode != ""
		withRelease = withRelease || r.Release != ""
	}
	t := Table{Headers: append([]string(nil), agentHeaders...)}
	if withMode {
		t.Headers = append(t.Headers, modeHeader)
	}
	if withRelease {
		t.Headers = append(t.Headers, releaseHeader)
	}
	for _, r := range rows {
		row := []string{r.Name, strconv.Itoa(r.Workloads), r.CPU, r.FreeMemory}
		if withMode {
			row = append(row, r.Mode)
		}
		if withRelease {
			row = append(row, r.Release)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// agentsTree is the rows as -o json and yaml print them: a list under
// "agents", each agent with the fields the server told.
func agentsTree(rows []AgentRow) state.Tree {
	list := []any{}
	for _, r := range rows {
		a := map[string]any{"name": r.Name, "workloads": r.Workloads}
		if r.cpu != nil {
			a["cpuUsage"] = *r.cpu
		}
		if r.free != nil {
			a["freeMemory"] = *r.free
		}
		if r.Mode != "" {
			a["mode"] = r.Mode
		}
		if r.Release != "" {
			a["release"] = r.Release
		}
		list = append(list, a)
	}
	return state.Tree{"agents": list}
}

// GetAgents prints the agents as a table (output "table" or ""), JSON or
// YAML, with each agent's mode and release when the server is a Grapnel
// one.
// swdd~cli-provides-list-of-agents~1
func (s *Session) GetAgents(ctx context.Context, output string) error {
	if err := CheckListOutput(output); err != nil {
		return err
	}
	cs, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	rows := AgentRows(cs)
	if s.Cluster != nil {
		if p, err := s.Cluster.Placement(ctx, &grapnelpb.PlacementRequest{}); err == nil {
			modes := map[string]string{}
			for _, m := range p.GetModes() {
				modes[m.GetAgent()] = m.GetMode()
			}
			rows = WithModes(rows, cs, modes)
		} else if s.Verbose {
			fmt.Fprintf(s.Err, "debug: no agent modes: %v\n", err)
		}
		// A Grapnel server older than releases answers Unimplemented:
		// the table then has no RELEASE column.
		if a, err := s.Cluster.Agents(ctx, &grapnelpb.AgentsRequest{}); err == nil {
			releases := map[string]string{}
			for _, ai := range a.GetAgents() {
				releases[ai.GetName()] = ai.GetRelease()
			}
			rows = WithReleases(rows, releases)
		} else if s.Verbose {
			fmt.Fprintf(s.Err, "debug: no agent releases: %v\n", err)
		}
	}
	switch output {
	case "json", "yaml":
		return WriteTree(s.Out, output, agentsTree(rows), nil)
	}
	fmt.Fprintln(s.Out, AgentTable(rows).Render(s.Width, FitNone, 0))
	return nil
}
