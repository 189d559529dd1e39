package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

var agentHeaders = []string{"NAME", "WORKLOADS", "CPU USAGE", "FREE MEMORY"}

// modeHeader is the column Grapnel adds to `get agents`: the agent's mode
// (docs/placement.md). It is shown when the server is a Grapnel one.
const modeHeader = "MODE"

// AgentRow is one line of the agents table. CPU and FreeMemory are empty
// until the agent has sent its first load report. Mode is empty when the
// server told none (an Ankaios server).
type AgentRow struct {
	Name       string
	Workloads  int
	CPU        string
	FreeMemory string
	Mode       string
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
		}
		if n, ok := num(st, "freeMemory"); ok {
			r.FreeMemory = strconv.FormatUint(n, 10) + "B"
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

// AgentTable lays out rows under the ank headers, and the mode when the
// rows have one.
func AgentTable(rows []AgentRow) Table {
	withMode := false
	for _, r := range rows {
		withMode = withMode || r.Mode != ""
	}
	t := Table{Headers: agentHeaders}
	if withMode {
		t.Headers = append(append([]string(nil), agentHeaders...), modeHeader)
	}
	for _, r := range rows {
		row := []string{r.Name, strconv.Itoa(r.Workloads), r.CPU, r.FreeMemory}
		if withMode {
			row = append(row, r.Mode)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// GetAgents prints the agents table, with each agent's mode when the
// server is a Grapnel one.
// swdd~cli-provides-list-of-agents~1
func (s *Session) GetAgents(ctx context.Context) error {
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
	}
	fmt.Fprintln(s.Out, AgentTable(rows).Render(s.Width, FitNone, 0))
	return nil
}
