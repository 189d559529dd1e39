package graph

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func wl(agent string, deps map[string]state.AddCondition) *state.Workload {
	return &state.Workload{Agent: agent, Runtime: "podman", Dependencies: deps}
}

func states(ws ...state.WorkloadState) state.WorkloadStatesMap {
	m := state.WorkloadStatesMap{}
	for _, s := range ws {
		m.Set(s.Instance, s.State)
	}
	return m
}

func inst(workload, agent, id string, e state.ExecutionState) state.WorkloadState {
	return state.WorkloadState{Instance: state.InstanceName{WorkloadName: workload, AgentName: agent, ID: id}, State: e}
}

var (
	stopping = state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop}
	starting = state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	failed   = state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit 1"}
)

func dep(from, to string, c state.AddCondition) Edge {
	return Edge{Kind: EdgeDependency, From: from, To: to, Condition: string(c)}
}

func del(from, to string) Edge {
	return Edge{Kind: EdgeDelete, From: from, To: to, Condition: string(state.DelCondNotPendingNorRunning)}
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name   string
		in     Input
		nodes  []Node // compared without Instances
		edges  []Edge
		agents []Agent
		cycles [][]string
	}{
		{
			name: "dependencies are labelled with their add condition; only RUNNING ones make delete edges",
			in: Input{Workloads: map[string]*state.Workload{
				"db":   wl("A", nil),
				"init": wl("A", nil),
				"web":  wl("B", map[string]state.AddCondition{"db": state.AddCondRunning, "init": state.AddCondSucceeded}),
				"fix":  wl("B", map[string]state.AddCondition{"init": state.AddCondFailed}),
			}},
			nodes: []Node{
				{Name: "db", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
				{Name: "fix", Kind: KindWorkload, Agent: "B", Runtime: "podman"},
				{Name: "init", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
				{Name: "web", Kind: KindWorkload, Agent: "B", Runtime: "podman"},
			},
			edges: []Edge{
				dep("fix", "init", state.AddCondFailed),
				dep("web", "db", state.AddCondRunning),
				dep("web", "init", state.AddCondSucceeded),
				del("db", "web"),
			},
			agents: []Agent{{Name: "A", Workloads: []string{"db", "init"}}, {Name: "B", Workloads: []string{"fix", "web"}}},
		},
		{
			// Requirement (issue 30, point 8, D14): between workloads that
			// are desired or still have instances; an entry of one that
			// is neither (deleted and gone, or never there) waits for
			// nothing and draws no edge from a missing node.
			name: "a given delete graph is drawn as it is, between workloads that exist",
			in: Input{
				Workloads: map[string]*state.Workload{"web": wl("A", map[string]state.AddCondition{"db": state.AddCondRunning}), "db": wl("A", nil)},
				States:    states(inst("old", "A", "5", stopping)),
				DeleteGraph: state.DeleteGraph{"db": {"web": state.DelCondRunning}, "old": {"web": state.DelCondNotPendingNorRunning},
					"gone": {"web": state.DelCondNotPendingNorRunning}, "db2": {"gone": state.DelCondRunning}},
			},
			nodes: []Node{
				{Name: "db", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
				{Name: "old", Kind: KindDeleting, Agent: "A", State: "Stopping", SubState: "WaitingToStop"},
				{Name: "web", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
			},
			edges: []Edge{
				dep("web", "db", state.AddCondRunning),
				{Kind: EdgeDelete, From: "db", To: "web", Condition: string(state.DelCondRunning)},
				del("old", "web"),
			},
			agents: []Agent{{Name: "A", Workloads: []string{"db", "old", "web"}}},
		},
		{
			name: "a dependency on a missing workload draws no delete edge from it",
			in: Input{Workloads: map[string]*state.Workload{
				"orphan": wl("A", map[string]state.AddCondition{"ghost": state.AddCondRunning}),
			}},
			nodes: []Node{
				{Name: "ghost", Kind: KindMissing},
				{Name: "orphan", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
			},
			edges:  []Edge{{Kind: EdgeDependency, From: "orphan", To: "ghost", Condition: string(state.AddCondRunning), Missing: true}},
			agents: []Agent{{Name: "A", Workloads: []string{"orphan"}}},
		},
		{
			name: "a dependency on a workload that does not exist is marked missing",
			in: Input{Workloads: map[string]*state.Workload{
				"web": wl("A", map[string]state.AddCondition{"ghost": state.AddCondSucceeded}),
			}},
			nodes: []Node{
				{Name: "ghost", Kind: KindMissing},
				{Name: "web", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
			},
			edges:  []Edge{{Kind: EdgeDependency, From: "web", To: "ghost", Condition: string(state.AddCondSucceeded), Missing: true}},
			agents: []Agent{{Name: "A", Workloads: []string{"web"}}},
		},
		{
			name: "cycles are marked: a two-workload cycle and a self-dependency, not what hangs off them",
			in: Input{Workloads: map[string]*state.Workload{
				"a":    wl("A", map[string]state.AddCondition{"b": state.AddCondSucceeded}),
				"b":    wl("A", map[string]state.AddCondition{"a": state.AddCondSucceeded}),
				"c":    wl("A", map[string]state.AddCondition{"a": state.AddCondSucceeded}),
				"self": wl("A", map[string]state.AddCondition{"self": state.AddCondFailed}),
			}},
			nodes: []Node{
				{Name: "a", Kind: KindWorkload, Agent: "A", Runtime: "podman", InCycle: true},
				{Name: "b", Kind: KindWorkload, Agent: "A", Runtime: "podman", InCycle: true},
				{Name: "c", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
				{Name: "self", Kind: KindWorkload, Agent: "A", Runtime: "podman", InCycle: true},
			},
			edges: []Edge{
				{Kind: EdgeDependency, From: "a", To: "b", Condition: string(state.AddCondSucceeded), InCycle: true},
				{Kind: EdgeDependency, From: "b", To: "a", Condition: string(state.AddCondSucceeded), InCycle: true},
				dep("c", "a", state.AddCondSucceeded),
				{Kind: EdgeDependency, From: "self", To: "self", Condition: string(state.AddCondFailed), InCycle: true},
			},
			agents: []Agent{{Name: "A", Workloads: []string{"a", "b", "c", "self"}}},
			cycles: [][]string{{"a", "b"}, {"self"}},
		},
		{
			name: "a templated agent is drawn on the rendered agent",
			in: Input{
				Workloads: map[string]*state.Workload{"web": wl("{{node.agent}}", nil), "db": wl("A", nil)},
				Agents:    map[string]string{"web": "B"},
			},
			nodes: []Node{
				{Name: "db", Kind: KindWorkload, Agent: "A", Runtime: "podman"},
				{Name: "web", Kind: KindWorkload, Agent: "B", Runtime: "podman"},
			},
			edges:  []Edge{},
			agents: []Agent{{Name: "A", Workloads: []string{"db"}}, {Name: "B", Workloads: []string{"web"}}},
		},
		{
			name: "execution states: the new instance on the assigned agent colours the node; a deleting workload is kept",
			in: Input{
				Workloads: map[string]*state.Workload{"web": wl("B", nil), "job": wl("A", nil), "idle": wl("", nil)},
				States: states(
					inst("web", "A", "1", stopping), // moved away from A
					inst("web", "B", "2", stopping), // replaced on B
					inst("web", "B", "3", starting),
					inst("job", "A", "9", failed),
					inst("old", "C", "5", stopping),
				),
				Connected: []string{"A", "D"},
			},
			nodes: []Node{
				{Name: "idle", Kind: KindWorkload, Runtime: "podman"},
				{Name: "job", Kind: KindWorkload, Agent: "A", Runtime: "podman", State: "Failed", SubState: "ExecFailed", AdditionalInfo: "exit 1"},
				{Name: "old", Kind: KindDeleting, Agent: "C", State: "Stopping", SubState: "WaitingToStop"},
				{Name: "web", Kind: KindWorkload, Agent: "B", Runtime: "podman", State: "Pending", SubState: "Starting"},
			},
			edges: []Edge{},
			agents: []Agent{
				{Name: "A", Connected: true, Workloads: []string{"job"}},
				{Name: "B", Workloads: []string{"web"}},
				{Name: "C", Workloads: []string{"old"}},
				{Name: "D", Connected: true, Workloads: []string{}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Build(tt.in)
			var nodes []Node
			for _, n := range g.Nodes {
				n.Instances = nil
				nodes = append(nodes, n)
			}
			if !reflect.DeepEqual(nodes, tt.nodes) {
				t.Errorf("nodes:\n got %+v\nwant %+v", nodes, tt.nodes)
			}
			if !reflect.DeepEqual(g.Edges, tt.edges) {
				t.Errorf("edges:\n got %+v\nwant %+v", g.Edges, tt.edges)
			}
			if !reflect.DeepEqual(g.Agents, tt.agents) {
				t.Errorf("agents:\n got %+v\nwant %+v", g.Agents, tt.agents)
			}
			want := tt.cycles
			if want == nil {
				want = [][]string{}
			}
			if !reflect.DeepEqual(g.Cycles, want) {
				t.Errorf("cycles = %v; want %v", g.Cycles, want)
			}
			// The server's check and the graph agree on whether there is
			// a cycle at all.
			if found := state.FindCycle(tt.in.Workloads, nil) != ""; found != (len(g.Cycles) > 0) {
				t.Errorf("state.FindCycle found a cycle: %v; graph cycles %v", found, g.Cycles)
			}
		})
	}
}

// Every instance is listed under its workload, sorted by agent and id.
func TestBuildListsInstances(t *testing.T) {
	g := Build(Input{
		Workloads: map[string]*state.Workload{"web": wl("B", nil)},
		States:    states(inst("web", "B", "3", starting), inst("web", "A", "1", stopping), inst("web", "B", "2", stopping)),
	})
	want := []Instance{
		{Agent: "A", ID: "1", State: "Stopping", SubState: "WaitingToStop"},
		{Agent: "B", ID: "2", State: "Stopping", SubState: "WaitingToStop"},
		{Agent: "B", ID: "3", State: "Pending", SubState: "Starting"},
	}
	if got := g.Node("web").Instances; !reflect.DeepEqual(got, want) {
		t.Fatalf("instances = %+v; want %+v", got, want)
	}
}

// bigInput is a state with every kind of node and edge.
func bigInput() Input {
	return Input{
		Workloads: map[string]*state.Workload{
			"db":    wl("A", nil),
			"cache": wl("A", map[string]state.AddCondition{"db": state.AddCondRunning}),
			"web":   wl("B", map[string]state.AddCondition{"db": state.AddCondRunning, "cache": state.AddCondRunning, "init": state.AddCondSucceeded}),
			"init":  wl("B", nil),
			"x":     wl("C", map[string]state.AddCondition{"y": state.AddCondFailed, "ghost": state.AddCondRunning}),
			"y":     wl("C", map[string]state.AddCondition{"x": state.AddCondFailed}),
			"lone":  wl("", nil),
		},
		States: states(
			inst("db", "A", "1", state.RunningOk),
			inst("cache", "A", "2", starting),
			inst("init", "B", "3", state.SucceededOk),
			inst("web", "B", "4", state.PendingInitial),
			inst("x", "C", "5", failed),
			inst("old", "A", "6", stopping),
			inst("y", "C", "7", state.AgentDisconnected),
		),
		Connected: []string{"A", "B"},
	}
}

// The same state gives the same graph and the same bytes, whatever the
// order Go's maps are walked in.
func TestBuildIsDeterministic(t *testing.T) {
	first := Build(bigInput())
	var want bytes.Buffer
	if err := WriteJSON(&want, first); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		var got bytes.Buffer
		if err := WriteJSON(&got, Build(bigInput())); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("two builds differ:\n%s\n---\n%s", want.String(), got.String())
		}
	}
}

// The JSON form reads back into the same graph, and has the documented
// top-level fields, lists even when empty.
func TestJSONRoundTrip(t *testing.T) {
	for _, in := range []Input{bigInput(), {}} {
		g := Build(in)
		var b bytes.Buffer
		if err := WriteJSON(&b, g); err != nil {
			t.Fatal(err)
		}
		var back Graph
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, g) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", &back, g)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"version", "agents", "nodes", "edges", "cycles"} {
			if v, ok := raw[k]; !ok || string(v) == "null" {
				t.Errorf("JSON field %q = %s; want it present and not null", k, v)
			}
		}
	}
}

func TestFocus(t *testing.T) {
	g := Build(bigInput())
	tests := []struct {
		names []string
		nodes []string
		err   string
	}{
		// cache: what it depends on (db) and what depends on it (web),
		// not web's other dependency init.
		{names: []string{"cache"}, nodes: []string{"cache", "db", "web"}},
		{names: []string{"web"}, nodes: []string{"cache", "db", "init", "web"}},
		{names: []string{"x"}, nodes: []string{"ghost", "x", "y"}},
		{names: []string{"lone", "init"}, nodes: []string{"init", "lone", "web"}},
		{names: []string{"nope"}, err: "workload 'nope' is not in the graph"},
	}
	for _, tt := range tests {
		f, err := g.Focus(tt.names)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Focus(%v) err = %v; want %q", tt.names, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Focus(%v): %v", tt.names, err)
		}
		var got []string
		for _, n := range f.Nodes {
			got = append(got, n.Name)
		}
		if !reflect.DeepEqual(got, tt.nodes) {
			t.Errorf("Focus(%v) nodes = %v; want %v", tt.names, got, tt.nodes)
		}
		for _, e := range f.Edges {
			if f.Node(e.From) == nil || f.Node(e.To) == nil {
				t.Errorf("Focus(%v) kept edge %+v to a dropped node", tt.names, e)
			}
		}
		for _, a := range f.Agents {
			for _, w := range a.Workloads {
				if f.Node(w) == nil {
					t.Errorf("Focus(%v) agent %s lists dropped %s", tt.names, a.Name, w)
				}
			}
		}
	}
	if f, _ := g.Focus([]string{"y"}); !reflect.DeepEqual(f.Cycles, [][]string{{"x", "y"}}) {
		t.Errorf("Focus(y) cycles = %v; want [[x y]]", f.Cycles)
	}
}

// A replica's graph comes from its store: the rendered agent, and the
// replicated delete graph, which keeps the entry of a deleted workload
// until its last instance is gone.
func TestFromStore(t *testing.T) {
	st := state.NewStore()
	web := &state.Workload{Agent: "{{node.name}}", Runtime: "podman", Configs: map[string]string{"node": "n"},
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning}}
	renderedWeb := web.Clone()
	renderedWeb.Agent = "B"
	dbIn := state.InstanceName{WorkloadName: "db", AgentName: "A", ID: "1"}
	webIn := state.InstanceName{WorkloadName: "web", AgentName: "B", ID: "2"}
	st.ApplyDesired(&state.DesiredUpdate{
		PutWorkloads: map[string]*state.Workload{"db": wl("A", nil), "web": web},
		PutConfigs:   map[string]any{"n": map[string]any{"name": "B"}},
		PutRendered:  map[string]state.Rendered{"db": {Instance: dbIn, Workload: wl("A", nil)}, "web": {Instance: webIn, Workload: renderedWeb}},
		SetStates:    []state.WorkloadState{{Instance: dbIn, State: state.PendingInitial}, {Instance: webIn, State: state.PendingInitial}},
	}, 1)
	st.AgentConnected("A", nil)
	st.ApplyStates([]state.WorkloadState{{Instance: dbIn, State: state.RunningOk}, {Instance: webIn, State: state.RunningOk}})

	g := Build(FromStore(st))
	if n := g.Node("web"); n.Agent != "B" || n.State != "Running" {
		t.Errorf("web %+v; want Running on the rendered agent B", n)
	}
	if !reflect.DeepEqual(g.Edges, []Edge{dep("web", "db", state.AddCondRunning), del("db", "web")}) {
		t.Errorf("edges %+v", g.Edges)
	}

	// web is deleted; its instance is stopping.
	st.ApplyDesired(&state.DesiredUpdate{DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}}, 2)
	st.ApplyStates([]state.WorkloadState{{Instance: webIn, State: stopping}})
	g = Build(FromStore(st))
	if n := g.Node("web"); n.Kind != KindDeleting || n.Agent != "B" || n.State != "Stopping" {
		t.Errorf("web %+v; want deleting, Stopping on B", n)
	}
	if !reflect.DeepEqual(g.Edges, []Edge{del("db", "web")}) {
		t.Errorf("edges %+v; want only the delete edge that is still stored", g.Edges)
	}
	if !reflect.DeepEqual(g.Agents, []Agent{{Name: "A", Connected: true, Workloads: []string{"db"}}, {Name: "B", Workloads: []string{"web"}}}) {
		t.Errorf("agents %+v", g.Agents)
	}

	// Once the instance is removed, the entry and the node are gone.
	st.ApplyStates([]state.WorkloadState{{Instance: webIn, State: state.Removed}})
	g = Build(FromStore(st))
	if g.Node("web") != nil || len(g.Edges) != 0 {
		t.Errorf("after removal: nodes %+v, edges %+v", g.Nodes, g.Edges)
	}
}
