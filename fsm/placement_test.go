package fsm

import (
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// A mode and a layout are replicated: applied from the log they change
// the store, are recorded in the history as transactions, and deleting
// or pinning the workload drops its layout.
func TestPlacementAndModeApply(t *testing.T) {
	f := New()
	placed := &state.Workload{Runtime: "podman", RuntimeConfig: "image: x", Tags: map[string]string{"grapnel.io/instances": "2"}}
	ri := state.NewInstanceName("svc", "", placed.RuntimeConfig)
	apply(t, f, &UpdateDesiredStateRequest{Update: state.DesiredUpdate{PutWorkloads: map[string]*state.Workload{"svc": placed},
		PutRendered: map[string]state.Rendered{"svc": {Instance: ri, Workload: placed}}}})
	apply(t, f, &SetAgentModeRequest{Agent: "b", Mode: state.ModeMaintenance, History: &HistoryMeta{TimeMs: 5, Requester: "cli-1"}})
	onA := ri
	onA.AgentName = "a"
	apply(t, f, &PlacementRequest{Update: state.PlacementUpdate{Layout: map[string][]string{"svc": {"a", "c"}},
		SetStates: []state.WorkloadState{{Instance: onA, State: state.PendingInitial}}},
		History: &HistoryMeta{TimeMs: 6, Decision: "workload svc added"}})
	st := read(f)
	if st.AgentMode("b") != state.ModeMaintenance || st.AgentMode("a") != state.ModeActive {
		t.Fatalf("modes = %v", st.Modes)
	}
	if got := st.Instances("svc"); len(got) != 2 || got[0] != onA || got[1].AgentName != "c" {
		t.Fatalf("instances = %v", got)
	}
	if s, ok := st.States.Get(onA); !ok || !s.IsPendingInitial() {
		t.Fatalf("state of %v = %v %v", onA, s, ok)
	}
	txs := st.History.Txs
	mode, pl := txs[len(txs)-2], txs[len(txs)-1]
	if mode.Kind != state.TxAgentMode || mode.Requester != "cli-1" || mode.Reason != "agent b: Active → Maintenance" {
		t.Fatalf("mode transaction = %+v", mode)
	}
	if pl.Kind != state.TxPlacement || pl.Reason != "workload svc added" || len(pl.Workloads) != 2 ||
		pl.Workloads[0].Op != state.OpAdded || pl.Workloads[0].Instance != onA.String() {
		t.Fatalf("placement transaction = %+v", pl)
	}
	apply(t, f, &PlacementRequest{Update: state.PlacementUpdate{Layout: map[string][]string{"svc": {"c"}}}})
	if pl := read(f).History.Txs; pl[len(pl)-1].Workloads[0].Op != state.OpDeleted {
		t.Fatalf("moving off is not a deletion: %+v", pl[len(pl)-1])
	}
	apply(t, f, &SetAgentModeRequest{Agent: "b", Mode: state.ModeActive})
	apply(t, f, &UpdateDesiredStateRequest{Update: state.DesiredUpdate{DeleteWorkloads: []string{"svc"}, DeleteRendered: []string{"svc"}}})
	st = read(f)
	if len(st.Modes) != 0 || len(st.Placement) != 0 {
		t.Fatalf("after activate and delete: modes %v, placement %v", st.Modes, st.Placement)
	}
	if !reflect.DeepEqual(st.Instances("svc"), []state.InstanceName(nil)) {
		t.Fatalf("a deleted workload has instances %v", st.Instances("svc"))
	}
}
