package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// Column positions in the workloads table.
const (
	colExecutionState = 3
	colAdditionalInfo = 4
)

var workloadHeaders = []string{"WORKLOAD NAME", "AGENT", "RUNTIME", "EXECUTION STATE", "ADDITIONAL INFO"}

// WorkloadRow is one line of the workloads table: one workload instance,
// or a workload that has no state yet (then Instance.ID is empty and State
// is the zero value).
type WorkloadRow struct {
	Instance state.InstanceName
	Runtime  string
	State    state.ExecutionState
}

// key identifies a row in a live table.
func (r WorkloadRow) key() string {
	if r.Instance.ID == "" {
		return r.Instance.WorkloadName + "\x00" + r.Instance.AgentName
	}
	return r.Instance.String()
}

// StateText is the EXECUTION STATE cell: "Running(Ok)", or "" for a
// workload without a state.
func (r WorkloadRow) StateText() string { return stateText(r.State) }

func stateText(e state.ExecutionState) string {
	if e.State == "" {
		return ""
	}
	return e.Short()
}

// InfoText is the ADDITIONAL INFO cell: trimmed, one line.
func (r WorkloadRow) InfoText() string { return oneLine(r.State.AdditionalInfo) }

func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", ", ")
}

func (r WorkloadRow) cells() []string {
	return []string{r.Instance.WorkloadName, r.Instance.AgentName, r.Runtime, r.StateText(), r.InfoText()}
}

// WorkloadRows builds the rows of `get workloads` from a complete-state
// tree: one per instance in workloadStates, plus one per desired workload
// that has no instance state yet, showing its agent. The runtime comes from
// the desired workload when it is assigned to the instance's agent, as in
// ank, or when the leader places it (then the layout, not the workload,
// names the agents). A templated agent ("{{node.agent}}") is compared as the server
// rendered it, with the config items the workload maps
// (swdd~agent-from-agent-field~1: the agent field is used rendered).
func WorkloadRows(cs state.Tree) []WorkloadRow {
	desired := node(cs, "desiredState", "workloads")
	agents := desiredAgents(desired, node(cs, "desiredState", "configs"))
	var rows []WorkloadRow
	hasState := map[string]bool{}
	for _, ws := range workloadStates(cs) {
		hasState[ws.Instance.WorkloadName] = true
		row := WorkloadRow{Instance: ws.Instance, State: ws.State}
		if w := node(desired, ws.Instance.WorkloadName); w != nil && (agents[ws.Instance.WorkloadName] == ws.Instance.AgentName || placed(w)) {
			row.Runtime = str(w, "runtime")
		}
		rows = append(rows, row)
	}
	for name, w := range desired {
		if hasState[name] {
			continue
		}
		wm, _ := w.(map[string]any)
		rows = append(rows, WorkloadRow{
			Instance: state.InstanceName{WorkloadName: name, AgentName: agents[name]},
			Runtime:  str(wm, "runtime"),
		})
	}
	sortRows(rows)
	return rows
}

// placed reports whether a desired workload is placed by the leader
// (placement.IsPlaced: no agent, the instances tag): its instances run on
// the agents of the layout, which the workload does not name.
func placed(w map[string]any) bool {
	if str(w, "agent") != "" {
		return false
	}
	tags, err := state.DecodeTags(w["tags"], "tags")
	if err != nil {
		return false
	}
	_, ok := tags[placement.TagInstances]
	return ok
}

// desiredAgents maps each desired workload to the agent it is assigned to:
// its agent field, rendered when it holds a template. A template that does
// not render (which the server would have refused) stays as it is and so
// matches no instance.
func desiredAgents(workloads, configs map[string]any) map[string]string {
	agents := make(map[string]string, len(workloads))
	var r *render.Renderer
	for name, w := range workloads {
		wm, _ := w.(map[string]any)
		agent := str(wm, "agent")
		agents[name] = agent
		if !strings.Contains(agent, "{{") {
			continue
		}
		// The config mappings are a string map, as tags are.
		aliases, err := state.DecodeTags(wm["configs"], "configs")
		if err != nil {
			continue
		}
		if r == nil {
			r = render.New()
		}
		if rw, _, err := r.Workload(name, &state.Workload{Agent: agent, Configs: aliases}, configs); err == nil {
			agents[name] = rw.Agent
		}
	}
	return agents
}

// sortRows orders rows by workload name, then agent and id, so a table
// reads the same every time.
func sortRows(rows []WorkloadRow) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].Instance, rows[j].Instance
		if a.WorkloadName != b.WorkloadName {
			return a.WorkloadName < b.WorkloadName
		}
		if a.AgentName != b.AgentName {
			return a.AgentName < b.AgentName
		}
		return a.ID < b.ID
	})
}

// WorkloadFilter selects rows of the workloads table; empty fields select
// everything.
type WorkloadFilter struct {
	Agent string
	// State matches the EXECUTION STATE cell ("Running(Ok)") or its state
	// name alone ("running"), ignoring case.
	State string
	Names []string
}

// Match reports whether the filter selects r.
func (f WorkloadFilter) Match(r WorkloadRow) bool {
	if f.Agent != "" && r.Instance.AgentName != f.Agent {
		return false
	}
	if f.State != "" && !strings.EqualFold(f.State, r.StateText()) && !strings.EqualFold(f.State, string(r.State.State)) {
		return false
	}
	if len(f.Names) > 0 {
		found := false
		for _, n := range f.Names {
			if n == r.Instance.WorkloadName {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Filter returns the rows the filter selects.
func (f WorkloadFilter) Filter(rows []WorkloadRow) []WorkloadRow {
	var out []WorkloadRow
	for _, r := range rows {
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out
}

// WorkloadTable lays out rows under the ank headers.
func WorkloadTable(rows []WorkloadRow) Table {
	t := Table{Headers: workloadHeaders}
	for _, r := range rows {
		t.Rows = append(t.Rows, r.cells())
	}
	return t
}

// workloadView is the table of `get workloads --watch`, kept current from
// workload-state broadcasts.
type workloadView struct {
	rows map[string]WorkloadRow
}

func newWorkloadView(rows []WorkloadRow) *workloadView {
	v := &workloadView{rows: map[string]WorkloadRow{}}
	for _, r := range rows {
		v.rows[r.key()] = r
	}
	return v
}

// apply folds broadcast states into the view. It reports whether an
// instance it does not know appeared; then the caller re-reads the whole
// state, because only that tells the runtime and drops replaced rows.
// swdd~cli-process-workload-updates~1
func (v *workloadView) apply(ws []state.WorkloadState) (refetch bool) {
	for _, s := range ws {
		k := s.Instance.String()
		r, ok := v.rows[k]
		switch {
		case !ok:
			if !s.State.IsRemoved() {
				refetch = true
			}
		case s.State.IsRemoved():
			delete(v.rows, k)
		default:
			r.State = s.State
			v.rows[k] = r
		}
	}
	return refetch
}

func (v *workloadView) sorted() []WorkloadRow {
	rows := make([]WorkloadRow, 0, len(v.rows))
	for _, r := range v.rows {
		rows = append(rows, r)
	}
	sortRows(rows)
	return rows
}

// GetWorkloads prints the workloads table.
// swdd~cli-provides-list-of-workloads~1
//
// output is "table" (or "") for ank's table, or "json" or "yaml" for the
// rows as workloadsTree lists them (Grapnel only).
func (s *Session) GetWorkloads(ctx context.Context, f WorkloadFilter, output string) error {
	if err := CheckListOutput(output); err != nil {
		return err
	}
	cs, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	rows := f.Filter(WorkloadRows(cs))
	if output == "json" || output == "yaml" {
		return WriteTree(s.Out, output, workloadsTree(rows), nil)
	}
	t := WorkloadTable(rows)
	fmt.Fprintln(s.Out, t.Render(s.Width, FitWrap, colAdditionalInfo))
	return nil
}

// workloadsTree is the rows as -o json and yaml print them, under
// "workloads": each instance with name, agent, id and runtime, and its
// executionState (state, subState, additionalInfo) as get state has it;
// a workload without a state yet has no id and no executionState. These
// names are kept: scripts read them (docs/operations.md).
func workloadsTree(rows []WorkloadRow) state.Tree {
	list := []any{}
	for _, r := range rows {
		w := map[string]any{"name": r.Instance.WorkloadName, "agent": r.Instance.AgentName, "runtime": r.Runtime}
		if r.Instance.ID != "" {
			w["id"] = r.Instance.ID
		}
		if r.State.State != "" {
			w["executionState"] = map[string]any{
				"state": string(r.State.State), "subState": r.State.SubState, "additionalInfo": r.State.AdditionalInfo,
			}
		}
		list = append(list, w)
	}
	return state.Tree{"workloads": list}
}

// CheckListOutput checks the -o of a listing: table (or empty), json or
// yaml.
func CheckListOutput(output string) error {
	switch output {
	case "", "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("%w: -o %q: use table, json or yaml", ErrBadArgument, output)
}

// WatchWorkloads prints the workloads table and keeps it current until ctx
// ends (Ctrl-C). When the stream ends it resumes on the new leader
// (resume.go). A table is shown only when it differs from the last one
// shown: a resume, or a broadcast that changes nothing the table shows,
// repeats nothing.
// swdd~cli-get-workloads-with-watch~1
func (s *Session) WatchWorkloads(ctx context.Context, f WorkloadFilter) error {
	updates := s.Conn.WorkloadStates()
	cs, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	view := newWorkloadView(WorkloadRows(cs))
	scr := &screen{w: s.Out, terminal: s.Terminal, width: s.Width}
	shown := ""
	show := func(always bool) {
		text := WorkloadTable(f.Filter(view.sorted())).Render(s.Width, FitWrap, colAdditionalInfo)
		if always || text != shown {
			scr.show(text)
			shown = text
		}
	}
	show(true)
	// reread takes the whole state again, on a new stream after the
	// old one ended; it reports false when ctx ended.
	reread := func(resumed bool) (bool, error) {
		for {
			if resumed {
				if err := s.resume(ctx); err != nil {
					if ctx.Err() != nil {
						return false, nil
					}
					return false, err
				}
				updates = s.Conn.WorkloadStates()
			}
			cs, err := s.CompleteState(ctx, nil)
			switch {
			case ctx.Err() != nil:
				return false, nil
			case s.Reconnect != nil && s.streamEnded(err):
				resumed = true
				continue
			case err != nil:
				return false, err
			}
			view = newWorkloadView(WorkloadRows(cs))
			show(false)
			return true, nil
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ws, ok := <-updates:
			if !ok {
				if ok, err := reread(true); !ok {
					return err
				}
				continue
			}
			states, err := rpc.WorkloadStatesFromProto(ws)
			if err != nil {
				s.debugf("ignoring a workload-state broadcast: %v", err)
				continue
			}
			if view.apply(states) {
				if ok, err := reread(false); !ok {
					return err
				}
				continue
			}
			show(false)
		}
	}
}
