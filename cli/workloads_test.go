package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func tree(t *testing.T, y string) state.Tree {
	t.Helper()
	tr, err := state.ParseTree([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// clusterYAML is a complete state with three workloads: web runs on
// agent_A, db has an old instance stopping on agent_A and a new one pending
// on agent_B, and batch has no state yet.
const clusterYAML = `
desiredState:
  apiVersion: v1
  workloads:
    web: {agent: agent_A, runtime: podman, runtimeConfig: "image: nginx"}
    db: {agent: agent_B, runtime: containerd, runtimeConfig: "image: pg"}
    batch: {agent: agent_C, runtime: podman, runtimeConfig: "image: job"}
  configs:
    zeta: z
    alpha: {a: b}
workloadStates:
  agent_A:
    web:
      "1111": {state: Running, subState: Ok, additionalInfo: ""}
    db:
      "2222": {state: Stopping, subState: RequestedAtRuntime, additionalInfo: ""}
  agent_B:
    db:
      "3333": {state: Pending, subState: StartingFailed, additionalInfo: "  image not found\nretrying  "}
agents:
  agent_A:
    status: {cpuUsage: 7, freeMemory: 1048576}
    tags: {}
  agent_B:
    tags: {}
`

func TestWorkloadRows(t *testing.T) {
	// swdd~cli-shall-present-list-of-workloads~1
	// swdd~cli-shall-sort-list-of-workloads~1
	rows := WorkloadRows(tree(t, clusterYAML))
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join(r.cells(), "|"))
	}
	want := []string{
		"batch|agent_C|podman||",
		// The old instance is on another agent than the desired one: no runtime, as in ank.
		"db|agent_A||Stopping(RequestedAtRuntime)|",
		"db|agent_B|containerd|Pending(StartingFailed)|image not found, retrying",
		"web|agent_A|podman|Running(Ok)|",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWorkloadRowsOfEmptyState(t *testing.T) {
	if rows := WorkloadRows(state.Tree{}); len(rows) != 0 {
		t.Fatalf("rows of an empty state: %v", rows)
	}
}

func TestWorkloadTableRender(t *testing.T) {
	// swdd~cli-shall-present-workloads-as-table~1
	got := WorkloadTable(WorkloadRows(tree(t, clusterYAML))).Render(0, FitWrap, colAdditionalInfo)
	want := lines(
		"WORKLOAD NAME   AGENT     RUNTIME      EXECUTION STATE                ADDITIONAL INFO          ",
		"batch           agent_C   podman                                                               ",
		"db              agent_A                Stopping(RequestedAtRuntime)                            ",
		"db              agent_B   containerd   Pending(StartingFailed)        image not found, retrying",
		"web             agent_A   podman       Running(Ok)                                             ",
	)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWorkloadFilter(t *testing.T) {
	// swdd~cli-shall-filter-list-of-workloads~1
	rows := WorkloadRows(tree(t, clusterYAML))
	tests := []struct {
		name   string
		filter WorkloadFilter
		want   []string // "workload@agent"
	}{
		{"none", WorkloadFilter{}, []string{"batch@agent_C", "db@agent_A", "db@agent_B", "web@agent_A"}},
		{"agent", WorkloadFilter{Agent: "agent_A"}, []string{"db@agent_A", "web@agent_A"}},
		{"full state text, any case", WorkloadFilter{State: "running(ok)"}, []string{"web@agent_A"}},
		{"state name alone", WorkloadFilter{State: "PENDING"}, []string{"db@agent_B"}},
		{"state without match", WorkloadFilter{State: "Failed"}, nil},
		{"names", WorkloadFilter{Names: []string{"db", "batch"}}, []string{"batch@agent_C", "db@agent_A", "db@agent_B"}},
		{"all at once", WorkloadFilter{Agent: "agent_A", State: "stopping", Names: []string{"db"}}, []string{"db@agent_A"}},
		{"unknown name", WorkloadFilter{Names: []string{"nope"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range tt.filter.Filter(rows) {
				got = append(got, r.Instance.WorkloadName+"@"+r.Instance.AgentName)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWorkloadViewApply(t *testing.T) {
	// swdd~cli-process-workload-updates~1
	inst := func(wl, agent, id string) state.InstanceName {
		return state.InstanceName{WorkloadName: wl, AgentName: agent, ID: id}
	}
	tests := []struct {
		name        string
		update      []state.WorkloadState
		wantRefetch bool
		want        []string // "workload@agent=state"
	}{
		{
			name:   "known instance changes state",
			update: []state.WorkloadState{{Instance: inst("web", "agent_A", "1111"), State: state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}}},
			want:   []string{"batch@agent_C=", "db@agent_A=Stopping(RequestedAtRuntime)", "db@agent_B=Pending(StartingFailed)", "web@agent_A=Failed(ExecFailed)"},
		},
		{
			name:   "removed instance leaves the table",
			update: []state.WorkloadState{{Instance: inst("db", "agent_A", "2222"), State: state.Removed}},
			want:   []string{"batch@agent_C=", "db@agent_B=Pending(StartingFailed)", "web@agent_A=Running(Ok)"},
		},
		{
			name:        "new instance asks for a fresh read",
			update:      []state.WorkloadState{{Instance: inst("batch", "agent_C", "4444"), State: state.PendingInitial}},
			wantRefetch: true,
			want:        []string{"batch@agent_C=", "db@agent_A=Stopping(RequestedAtRuntime)", "db@agent_B=Pending(StartingFailed)", "web@agent_A=Running(Ok)"},
		},
		{
			name:   "removal of an unknown instance changes nothing",
			update: []state.WorkloadState{{Instance: inst("old", "agent_C", "9"), State: state.Removed}},
			want:   []string{"batch@agent_C=", "db@agent_A=Stopping(RequestedAtRuntime)", "db@agent_B=Pending(StartingFailed)", "web@agent_A=Running(Ok)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newWorkloadView(WorkloadRows(tree(t, clusterYAML)))
			if got := v.apply(tt.update); got != tt.wantRefetch {
				t.Fatalf("refetch = %v, want %v", got, tt.wantRefetch)
			}
			var got []string
			for _, r := range v.sorted() {
				got = append(got, r.Instance.WorkloadName+"@"+r.Instance.AgentName+"="+r.StateText())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAgentRows(t *testing.T) {
	// swdd~cli-presents-connected-agents-as-table~2
	// swdd~cli-processes-complete-state-to-provide-connected-agents~1
	got := AgentTable(AgentRows(tree(t, clusterYAML))).Render(0, FitNone, 0)
	want := lines(
		"NAME      WORKLOADS   CPU USAGE   FREE MEMORY",
		"agent_A   2           7%          1048576B   ",
		"agent_B   1                                  ",
	)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// Requirement (issue 28, point 1): a Grapnel server's answer adds a
// RELEASE column: each agent's release as the leader heard it, "-" for
// one it has none of (the rows of an Ankaios server have no column).
func TestAgentRowsWithReleases(t *testing.T) {
	rows := WithReleases(AgentRows(tree(t, clusterYAML)), map[string]string{"agent_A": "0.4.0-dev"})
	got := AgentTable(rows).Render(0, FitNone, 0)
	want := lines(
		"NAME      WORKLOADS   CPU USAGE   FREE MEMORY   RELEASE  ",
		"agent_A   2           7%          1048576B      0.4.0-dev",
		"agent_B   1                                     -        ",
	)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	text, err := EncodeJSON(agentsTree(rows), nil, false)
	if err != nil || text != `{"agents":[{"cpuUsage":7,"freeMemory":1048576,"name":"agent_A","release":"0.4.0-dev","workloads":2},{"name":"agent_B","release":"-","workloads":1}]}` {
		t.Fatalf("json %s, %v", text, err)
	}
}

func TestConfigTable(t *testing.T) {
	// swdd~cli-shall-present-list-of-configs~1
	// swdd~cli-shall-sort-list-of-configs~1
	got := ConfigTable(tree(t, clusterYAML)).Render(0, FitNone, 0)
	if want := lines("CONFIG", "alpha ", "zeta  "); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := ConfigTable(state.Tree{}).Render(0, FitNone, 0); got != "CONFIG" {
		t.Fatalf("empty: got %q", got)
	}
}

// TestWorkloadRowsTemplatedAgent: a workload whose agent is a template
// ("{{node.agent}}", as the greeter of `make demo`) is matched to its
// instances by the agent the server rendered, so RUNTIME is filled in.
// swdd~agent-from-agent-field~1
// swdd~config-renderer-renders-workload-configuration~2
func TestWorkloadRowsTemplatedAgent(t *testing.T) {
	const desired = `
desiredState:
  apiVersion: v1
  workloads:
    greeter:
      agent: "{{node.agent}}"
      runtime: process
      runtimeConfig: "command: /bin/true"
      configs: {node: demo_node}
    lost:
      agent: "{{missing.agent}}"
      runtime: process
      runtimeConfig: "command: /bin/true"
      configs: {missing: no_such_config}
    plain:
      agent: "{{not_mapped}}"
      runtime: podman
      runtimeConfig: "image: x"
  configs:
    demo_node: {agent: agent_A}
`
	tests := []struct {
		name     string
		workload string // the rows of this workload are compared
		states   string
		want     []string
	}{
		{"rendered agent matches the instance", "greeter", `
workloadStates:
  agent_A:
    greeter: {"1111": {state: Running, subState: Ok}}
`, []string{"greeter|agent_A|process|Running(Ok)|"}},
		{"old instance on another agent", "greeter", `
workloadStates:
  agent_A:
    greeter: {"1111": {state: Running, subState: Ok}}
  agent_B:
    greeter: {"2222": {state: Stopping, subState: RequestedAtRuntime}}
`, []string{"greeter|agent_A|process|Running(Ok)|", "greeter|agent_B||Stopping(RequestedAtRuntime)|"}},
		{"no state yet shows the rendered agent", "greeter", ``, []string{"greeter|agent_A|process||"}},
		{"a template that does not render matches nothing", "lost", `
workloadStates:
  agent_A:
    lost: {"3333": {state: Pending, subState: Initial}}
`, []string{"lost|agent_A||Pending(Initial)|"}},
		{"a template without config mappings is not rendered", "plain", `
workloadStates:
  agent_A:
    plain: {"4444": {state: Pending, subState: Initial}}
`, []string{"plain|agent_A||Pending(Initial)|"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range WorkloadRows(tree(t, desired+tt.states)) {
				if r.Instance.WorkloadName == tt.workload {
					got = append(got, strings.Join(r.cells(), "|"))
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Requirement (issue 30, point 8, D14): a workload the leader places
// (no agent, the grapnel.io/instances tag) shows its runtime on every
// instance: the layout, not the workload, names their agents. One with
// no agent and no such tag stays as in ank.
func TestWorkloadRowsPlacedRuntime(t *testing.T) {
	rows := WorkloadRows(tree(t, `
desiredState:
  apiVersion: v1
  workloads:
    logger: {runtime: process, runtimeConfig: "command: [x]", tags: {grapnel.io/instances: "2"}}
    loose: {runtime: podman, runtimeConfig: "image: x"}
workloadStates:
  a1:
    logger: {"1111": {state: Running, subState: Ok}}
    loose: {"3333": {state: Running, subState: Ok}}
  a2:
    logger: {"2222": {state: Running, subState: Ok}}
`))
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join(r.cells(), "|"))
	}
	want := []string{"logger|a1|process|Running(Ok)|", "logger|a2|process|Running(Ok)|", "loose|a1||Running(Ok)|"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
