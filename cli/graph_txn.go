package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// GraphAtTxn rewinds cur, the graph input of the current state, to the
// desired state right after history transaction n: going back from the
// newest transaction, it takes out each workload an update added, puts
// back the agent, runtime and dependencies an update changed (their
// values before), and puts back each workload an update deleted as the
// updates up to then had made it. txs is the history the leader keeps,
// oldest first. It returns the input, the workloads transaction n
// changed (the graph marks them) and a note for each workload it could
// not rebuild whole (a spec from before the oldest kept transaction, or
// dependencies cut for length). Execution states are not replicated per
// transaction in a form a graph can use, so the input has none.
func GraphAtTxn(cur graph.Input, txs []*grapnelpb.Transaction, n uint64) (graph.Input, []string, []string, error) {
	i := slices.IndexFunc(txs, func(tx *grapnelpb.Transaction) bool { return tx.GetSeq() == n })
	if i < 0 {
		if len(txs) > 0 && n < txs[0].GetSeq() {
			return graph.Input{}, nil, nil, fmt.Errorf("%w: --txn %d was pruned from the history (the oldest kept is %d)", ErrBadArgument, n, txs[0].GetSeq())
		}
		return graph.Input{}, nil, nil, fmt.Errorf("%w: --txn %d: no such transaction in the history (grapnel history lists them)", ErrBadArgument, n)
	}
	specs := make(map[string]*state.Workload, len(cur.Workloads))
	for name, w := range cur.Workloads {
		specs[name] = &state.Workload{Agent: w.Agent, Runtime: w.Runtime, Dependencies: maps.Clone(w.Dependencies)}
	}
	agents := maps.Clone(cur.Agents)
	if agents == nil {
		agents = map[string]string{}
	}
	var notes []string
	for j := len(txs) - 1; j > i; j-- {
		tx := txs[j]
		if tx.GetKind() != string(state.TxUpdate) {
			continue
		}
		for _, w := range tx.GetWorkloads() {
			name := w.GetName()
			switch w.GetOp() {
			case string(state.OpAdded):
				delete(specs, name)
				delete(agents, name)
			case string(state.OpUpdated):
				s := specs[name]
				if s == nil {
					continue
				}
				for _, c := range w.GetChanges() {
					if note := setField(s, c.GetField(), c.GetOld()); note != "" {
						notes = append(notes, fmt.Sprintf("workload %s before transaction %d: %s", name, tx.GetSeq(), note))
					}
				}
				setAgent(agents, name, w.GetOldInstance())
			case string(state.OpDeleted):
				s, note := specBefore(txs[:j], name)
				if note != "" {
					notes = append(notes, fmt.Sprintf("workload %s (deleted in transaction %d): %s", name, tx.GetSeq(), note))
				}
				specs[name] = s
				setAgent(agents, name, w.GetOldInstance())
			}
		}
	}
	var changed []string
	for _, w := range txs[i].GetWorkloads() {
		if _, ok := specs[w.GetName()]; ok && !slices.Contains(changed, w.GetName()) {
			changed = append(changed, w.GetName())
		}
	}
	slices.Sort(changed)
	return graph.Input{Workloads: specs, Agents: agents}, changed, notes, nil
}

// specBefore is a workload as the updates in txs made it, from the
// update that added it on.
func specBefore(txs []*grapnelpb.Transaction, name string) (*state.Workload, string) {
	var s *state.Workload
	note := ""
	for _, tx := range txs {
		if tx.GetKind() != string(state.TxUpdate) {
			continue
		}
		for _, w := range tx.GetWorkloads() {
			if w.GetName() != name {
				continue
			}
			switch w.GetOp() {
			case string(state.OpAdded):
				s, note = &state.Workload{}, ""
			case string(state.OpDeleted):
				s = nil
				continue
			}
			if s == nil {
				continue
			}
			for _, c := range w.GetChanges() {
				if n := setField(s, c.GetField(), c.GetNew()); n != "" {
					note = n
				}
			}
		}
	}
	if s == nil {
		return &state.Workload{}, "its spec dates from before the oldest transaction kept; drawn without agent and dependencies"
	}
	return s, note
}

// setField sets one field a transaction records; only the fields a
// graph draws matter.
func setField(s *state.Workload, field, v string) string {
	switch field {
	case "agent":
		s.Agent = v
	case "runtime":
		s.Runtime = v
	case "dependencies":
		deps := map[string]state.AddCondition{}
		if v != "" {
			if err := json.Unmarshal([]byte(v), &deps); err != nil {
				return "its dependencies were cut for length in the history; drawn without them"
			}
		}
		s.Dependencies = deps
	}
	return ""
}

// setAgent takes a workload's rendered agent from an instance name.
func setAgent(agents map[string]string, name, instance string) {
	if in, err := state.ParseInstanceName(instance); err == nil && in.AgentName != "" {
		agents[name] = in.AgentName
	} else {
		delete(agents, name)
	}
}

// MarkChanged sets Changed on the nodes of the named workloads.
func MarkChanged(g *graph.Graph, names []string) {
	for i := range g.Nodes {
		if slices.Contains(names, g.Nodes[i].Name) {
			g.Nodes[i].Changed = true
		}
	}
}
