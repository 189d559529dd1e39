package cli

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

func manifest(t *testing.T, source, y string) Manifest {
	t.Helper()
	m, err := ParseManifest(source, []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseManifestErrors(t *testing.T) {
	// swdd~cli-apply-manifest-check-for-api-version-compatibility~1
	tests := []struct {
		name string
		in   string
		want string // substring of the error
	}{
		{"wrong apiVersion", "apiVersion: v2\nworkloads: {}", "manifest 'm.yaml': apiVersion: Unsupported API version. Received 'v2', expected 'v1'"},
		{"missing apiVersion", "workloads: {}", "Unsupported API version. Received '', expected 'v1'"},
		{"apiVersion of the wrong type", "apiVersion: 1\n", "apiVersion"},
		{"not YAML", "apiVersion: [v1", "manifest 'm.yaml': not valid YAML"},
		{"not a map", "- a\n- b\n", "expected a map at the top level"},
		{"unknown top-level field", "apiVersion: v1\nworkload: {}", "workload"},
		{"workload without runtime", "apiVersion: v1\nworkloads:\n  web: {agent: a, runtimeConfig: x}", "workloads.web.runtime: missing field"},
		{"bad workload name", "apiVersion: v1\nworkloads:\n  we.b: {agent: a, runtime: podman, runtimeConfig: x}", "contains characters other than"},
		{"bad config key", "apiVersion: v1\nconfigs:\n  \"a b\": x", "config key 'a b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest("m.yaml", []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseManifestAcceptsV01WithWarning(t *testing.T) {
	// swdd~cli-apply-manifest-accepts-v01-api-version~1
	m := manifest(t, "old.yaml", `
apiVersion: v0.1
workloads:
  web:
    agent: agent_A
    runtime: podman
    runtimeConfig: "image: nginx"
    tags:
      - key: owner
        value: me
`)
	if m.Warning == "" {
		t.Fatal("no deprecation warning for v0.1")
	}
	plan, err := PlanApply([]Manifest{m}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tags := node(plan.NewState, "desiredState", "workloads", "web", "tags")
	if tags["owner"] != "me" {
		t.Fatalf("v0.1 tags not carried over as a map: %v", tags)
	}
}

func TestParseEmptyManifest(t *testing.T) {
	m := manifest(t, "empty.yaml", "")
	plan, err := PlanApply([]Manifest{m}, nil, false)
	if err != nil || len(plan.Masks) != 0 {
		t.Fatalf("plan of an empty manifest = %v, %v", plan, err)
	}
}

const (
	webManifest = `
apiVersion: v1
workloads:
  web:
    agent: agent_A
    runtime: podman
    runtimeConfig: |
      image: nginx
configs:
  site: {title: hello}
`
	dbManifest = `
apiVersion: v1
workloads:
  db:
    runtime: podman
    runtimeConfig: "image: pg"
  cache:
    agent: ""
    runtime: podman
    runtimeConfig: "image: redis"
`
)

func TestPlanApply(t *testing.T) {
	// swdd~cli-apply-accepts-list-of-ankaios-manifests~1
	// swdd~cli-apply-generates-filter-masks-from-ankaios-manifests~1
	// swdd~cli-apply-ankaios-manifest-agent-name-overwrite~1
	// swdd~cli-apply-ankaios-manifest-error-on-agent-name-absence~2
	agentB := "agent_B"
	empty := ""
	web := manifest(t, "web.yaml", webManifest)
	db := manifest(t, "db.yaml", dbManifest)
	tests := []struct {
		name       string
		manifests  []Manifest
		agent      *string
		deleteMode bool
		wantMasks  []string
		wantAgents map[string]string // workload → agent in the new state; nil: no desiredState
		wantErr    string
		wantIs     error
	}{
		{
			name:       "one manifest",
			manifests:  []Manifest{web},
			wantMasks:  []string{"desiredState.configs.site", "desiredState.workloads.web"},
			wantAgents: map[string]string{"web": "agent_A"},
		},
		{
			name:      "workload without agent needs --agent",
			manifests: []Manifest{web, db},
			wantErr:   "manifest 'db.yaml': workload 'db': no agent name specified: use --agent",
			wantIs:    ErrNoAgent,
		},
		{
			name:       "--agent fills and overrides every agent",
			manifests:  []Manifest{web, db},
			agent:      &agentB,
			wantMasks:  []string{"desiredState.configs.site", "desiredState.workloads.cache", "desiredState.workloads.db", "desiredState.workloads.web"},
			wantAgents: map[string]string{"web": "agent_B", "db": "agent_B", "cache": "agent_B"},
		},
		{
			name:       "an empty --agent is an agent",
			manifests:  []Manifest{db},
			agent:      &empty,
			wantMasks:  []string{"desiredState.workloads.cache", "desiredState.workloads.db"},
			wantAgents: map[string]string{"db": "", "cache": ""},
		},
		{
			name:       "delete mode needs no agent and sends nothing",
			manifests:  []Manifest{web, db},
			deleteMode: true,
			wantMasks:  []string{"desiredState.configs.site", "desiredState.workloads.cache", "desiredState.workloads.db", "desiredState.workloads.web"},
		},
		{
			name:      "the same workload twice",
			manifests: []Manifest{web, manifest(t, "again.yaml", "apiVersion: v1\nworkloads:\n  web: {agent: a, runtime: podman, runtimeConfig: x}")},
			wantErr:   "workload 'web' is defined in both 'web.yaml' and 'again.yaml'",
		},
		{
			name:      "the same config twice",
			manifests: []Manifest{web, manifest(t, "cfg.yaml", "apiVersion: v1\nconfigs:\n  site: x")},
			wantErr:   "config 'site' is defined in both 'web.yaml' and 'cfg.yaml'",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := PlanApply(tt.manifests, tt.agent, tt.deleteMode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Fatalf("err = %v, want errors.Is %v", err, tt.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan.Masks, tt.wantMasks) {
				t.Fatalf("masks = %v, want %v", plan.Masks, tt.wantMasks)
			}
			if tt.wantAgents == nil {
				if len(plan.NewState) != 0 {
					t.Fatalf("new state = %v, want empty", plan.NewState)
				}
				return
			}
			wls := node(plan.NewState, "desiredState", "workloads")
			got := map[string]string{}
			for name := range wls {
				got[name] = str(node(wls, name), "agent")
			}
			if !reflect.DeepEqual(got, tt.wantAgents) {
				t.Fatalf("agents = %v, want %v", got, tt.wantAgents)
			}
		})
	}
}

// TestPlanApplyBuildsAValidUpdate checks that the plan converts to the
// wire message and back without losing anything.
// swdd~cli-apply-generates-state-object-from-ankaios-manifests~1
func TestPlanApplyBuildsAValidUpdate(t *testing.T) {
	m := manifest(t, "full.yaml", `
apiVersion: v1
workloads:
  web:
    agent: "{{node.name}}"
    runtime: podman
    restartPolicy: ON_FAILURE
    dependencies: {db: ADD_COND_RUNNING}
    tags: {owner: me}
    configs: {node: nodecfg}
    runtimeConfig: |
      image: nginx
    files:
      - {mountPoint: /etc/a, data: "x"}
    controlInterfaceAccess:
      allowRules:
        - {type: StateRule, operation: Read, filterMasks: ["desiredState.workloads"]}
        - {type: LogRule, workloadNames: ["db"]}
configs:
  nodecfg: {name: agent_A}
`)
	plan, err := PlanApply([]Manifest{m}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rpc.CompleteStateFromTree(plan.NewState)
	if err != nil {
		t.Fatalf("plan does not convert: %v", err)
	}
	back := rpc.CompleteStateToTree(cs)
	got, err := state.DecodeState(node(back, "desiredState"), "desiredState")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Workloads["web"], m.State.Workloads["web"]) {
		t.Fatalf("workload changed on the way:\n%+v\n%+v", got.Workloads["web"], m.State.Workloads["web"])
	}
	if !reflect.DeepEqual(got.Configs, m.State.Configs) {
		t.Fatalf("configs changed on the way: %v", got.Configs)
	}
}

func TestDeleteMasks(t *testing.T) {
	tests := []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{[]string{"a", "b-2"}, []string{"desiredState.workloads.a", "desiredState.workloads.b-2"}, ""},
		{[]string{"a.runtime"}, nil, "contains characters other than"},
		{[]string{""}, nil, "must not be empty"},
	}
	for _, tt := range tests {
		got, err := DeleteMasks(maskWorkloads, "workload name", tt.names)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err = %v, want %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: got %v, %v", tt.names, got, err)
		}
	}
}

func TestParseTags(t *testing.T) {
	tests := []struct {
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{nil, map[string]string{}, false},
		{[]string{"a=1", "b=x=y", "c="}, map[string]string{"a": "1", "b": "x=y", "c": ""}, false},
		{[]string{"novalue"}, nil, true},
		{[]string{"=v"}, nil, true},
	}
	for _, tt := range tests {
		got, err := ParseTags(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("ParseTags(%v) = %v, %v", tt.in, got, err)
		}
	}
}

func TestRunSpecPlan(t *testing.T) {
	// swdd~cli-provides-run-workload~1
	r := RunSpec{Name: "web", Runtime: "podman", RuntimeConfig: "image: nginx", Agent: "agent_A", Tags: map[string]string{"k": "v"}}
	tr, masks, err := r.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(masks, []string{"desiredState.workloads.web"}) {
		t.Fatalf("masks = %v", masks)
	}
	w := node(tr, "desiredState", "workloads", "web")
	if str(w, "agent") != "agent_A" || str(w, "runtime") != "podman" || str(w, "runtimeConfig") != "image: nginx" || node(w, "tags")["k"] != "v" {
		t.Fatalf("workload = %v", w)
	}
	if _, err := rpc.CompleteStateFromTree(tr); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (RunSpec{Name: "we b"}).Plan(); err == nil {
		t.Fatal("invalid name accepted")
	}
}
