package state

import (
	"reflect"
	"sync"
	"testing"
)

// planViewStore is a store with two agents' workloads, a dependency,
// states, a placement and a lock.
func planViewStore(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	s.AgentConnected("agent_A", map[string]string{"zone": "front"})
	s.AgentConnected("agent_B", nil)
	u := &DesiredUpdate{PutWorkloads: map[string]*Workload{}, PutRendered: map[string]Rendered{}}
	for _, w := range []struct{ name, agent, dep string }{{"db", "agent_A", ""}, {"web", "agent_A", "db"}, {"cache", "agent_B", ""}} {
		wl := &Workload{Agent: w.agent, Runtime: "podman", RuntimeConfig: "image: " + w.name}
		if w.dep != "" {
			wl.Dependencies = map[string]AddCondition{w.dep: AddCondRunning}
		}
		in := NewInstanceName(w.name, w.agent, wl.RuntimeConfig)
		u.PutWorkloads[w.name], u.PutRendered[w.name] = wl, Rendered{Instance: in, Workload: wl}
		u.SetStates = append(u.SetStates, WorkloadState{Instance: in, State: RunningOk})
	}
	s.ApplyDesired(u, 1)
	s.ApplyPlacement(&PlacementUpdate{Layout: map[string][]string{"placed": {"agent_A", "agent_B"}}})
	if err := s.TakeLocks([]string{WorkloadObject("db")}, "alice", "maintenance", 1000, 0); err != nil {
		t.Fatal(err)
	}
	return s
}

// A planning view keeps what it saw while its store goes on changing
// (on another goroutine, as the leader loop does while a dry-run plans),
// and shares the per-agent states until the store changes them: only
// the agent changed is copied.
func TestForPlanningKeepsItsView(t *testing.T) {
	s := planViewStore(t)
	want := s.Clone()
	v := s.ForPlanning()
	if mapID(v.States["agent_A"]) != mapID(s.States["agent_A"]) || mapID(v.Desired.Workloads) != mapID(s.Desired.Workloads) {
		t.Fatal("the view copied what it may share")
	}

	// A reader on another goroutine: the race detector sees any map the
	// store changes in place while the view holds it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = v.States.All()
			for _, m := range v.DeleteGraph {
				_ = len(m)
			}
			for _, a := range v.Agents {
				_ = len(a.Tags)
			}
			_, _, _ = len(v.Placement), len(v.Locks), v.DesiredBytes()+v.AgentBytes("agent_A")
			for n := range v.Desired.Workloads {
				_ = v.Rendered[n]
			}
		}
	}()

	runningB := s.States.OfAgent("agent_B")
	s.ApplyStates([]WorkloadState{{Instance: s.Rendered["db"].Instance, State: SucceededOk}})
	if mapID(s.States["agent_A"]) == mapID(v.States["agent_A"]) || mapID(s.States["agent_B"]) != mapID(v.States["agent_B"]) {
		t.Fatal("a change to agent_A's states must copy agent_A's map and only it")
	}
	s.ApplyStates([]WorkloadState{{Instance: s.Rendered["web"].Instance, State: Removed}})
	s.AgentGone("agent_B")
	s.AgentConnected("agent_C", nil)
	s.AgentLoad("agent_A", 50, 1<<20)
	wl := &Workload{Agent: "agent_C", Runtime: "podman", RuntimeConfig: "image: new", Dependencies: map[string]AddCondition{"cache": AddCondRunning}}
	in := NewInstanceName("new", "agent_C", wl.RuntimeConfig)
	s.BeginBatch()
	s.ApplyDesired(&DesiredUpdate{
		PutWorkloads: map[string]*Workload{"new": wl}, PutRendered: map[string]Rendered{"new": {Instance: in, Workload: wl}},
		DeleteWorkloads: []string{"db"}, DeleteRendered: []string{"db"},
		SetStates:    []WorkloadState{{Instance: in, State: PendingInitial}},
		DeleteStates: []InstanceName{runningB[0].Instance},
		AgentTags:    map[string]map[string]string{"agent_A": {"zone": "rear"}},
	}, 2)
	s.ApplyDesired(&DesiredUpdate{DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}}, 3)
	s.EndBatch()
	s.ApplyPlacement(&PlacementUpdate{Layout: map[string][]string{"placed": nil}})
	if err := s.ReleaseLocks([]string{WorkloadObject("db")}, "alice", 2000, false); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	got := map[string]any{"desired": v.Desired, "rendered": v.Rendered, "states": v.States, "graph": v.DeleteGraph,
		"agents": v.Agents, "placement": v.Placement, "locks": v.Locks, "seq": v.DesiredSeq, "revision": v.Revision,
		"desiredBytes": v.DesiredBytes(), "agentBytes": v.AgentBytes("agent_A")}
	exp := map[string]any{"desired": want.Desired, "rendered": want.Rendered, "states": want.States, "graph": want.DeleteGraph,
		"agents": want.Agents, "placement": want.Placement, "locks": want.Locks, "seq": want.DesiredSeq, "revision": want.Revision,
		"desiredBytes": want.DesiredBytes(), "agentBytes": want.AgentBytes("agent_A")}
	for k := range exp {
		if !reflect.DeepEqual(got[k], exp[k]) {
			t.Errorf("the view's %s changed:\n got %#v\nwant %#v", k, got[k], exp[k])
		}
	}
	// And the store did change.
	if _, ok := s.Desired.Workloads["db"]; ok || s.DesiredSeq != 3 || len(s.States["agent_C"]) != 1 || s.Agents["agent_A"].Tags["zone"] != "rear" {
		t.Fatalf("the store did not take the changes: seq %d, states %v", s.DesiredSeq, s.States)
	}
}

// A second view, taken after the store copied an agent's states for the
// first, shares that copy again: the store copies once per view.
func TestForPlanningCopiesOncePerView(t *testing.T) {
	s := planViewStore(t)
	v1 := s.ForPlanning()
	db := s.Rendered["db"].Instance
	s.ApplyStates([]WorkloadState{{Instance: db, State: SucceededOk}})
	copied := mapID(s.States["agent_A"])
	s.ApplyStates([]WorkloadState{{Instance: db, State: AgentDisconnected}})
	if mapID(s.States["agent_A"]) != copied {
		t.Fatal("a second change under the same view copied again")
	}
	v2 := s.ForPlanning()
	s.ApplyStates([]WorkloadState{{Instance: db, State: RunningOk}})
	if st, _ := v1.States.Get(db); st != RunningOk {
		// v1 saw RunningOk from before its view was taken.
		t.Fatalf("view 1 sees %v", st)
	}
	if st, _ := v2.States.Get(db); st != AgentDisconnected {
		t.Fatalf("view 2 sees %v, want the AgentDisconnected it was taken with", st)
	}
}
