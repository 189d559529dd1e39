package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/grapnel-io/grapnel/state"
)

var agentHeaders = []string{"NAME", "WORKLOADS", "CPU USAGE", "FREE MEMORY"}

// AgentRow is one line of the agents table. CPU and FreeMemory are empty
// until the agent has sent its first load report.
type AgentRow struct {
	Name       string
	Workloads  int
	CPU        string
	FreeMemory string
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

// AgentTable lays out rows under the ank headers.
func AgentTable(rows []AgentRow) Table {
	t := Table{Headers: agentHeaders}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Name, strconv.Itoa(r.Workloads), r.CPU, r.FreeMemory})
	}
	return t
}

// GetAgents prints the agents table.
// swdd~cli-provides-list-of-agents~1
func (s *Session) GetAgents(ctx context.Context) error {
	cs, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, AgentTable(AgentRows(cs)).Render(s.Width, FitNone, 0))
	return nil
}
