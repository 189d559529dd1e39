package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

const stateYAML = `
agents:
  agent_A:
    tags: {}
    status: {freeMemory: 1024, cpuUsage: 3}
workloadStates:
  agent_A:
    web:
      abc: {additionalInfo: "", subState: Ok, state: Running}
desiredState:
  configs: {}
  workloads:
    web:
      runtimeConfig: "image: nginx\ncommandArgs: [\"-g\", \"daemon off;\"]\n"
      runtime: podman
      restartPolicy: NEVER
      agent: agent_A
      tags: {owner: me}
  apiVersion: v1
`

func TestFormatStateYAML(t *testing.T) {
	// swdd~cli-shall-support-desired-state-yaml~1
	got, err := FormatState(tree(t, stateYAML), FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	want := `desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: agent_A
      tags:
        owner: me
      restartPolicy: NEVER
      runtime: podman
      runtimeConfig: |
        image: nginx
        commandArgs: ["-g", "daemon off;"]
workloadStates:
  agent_A:
    web:
      abc:
        state: Running
        subState: Ok
        additionalInfo: ""
agents:
  agent_A:
    status:
      cpuUsage: 3
      freeMemory: 1024
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	back := tree(t, got)
	if _, err := rpc.CompleteStateFromTree(back); err != nil {
		t.Fatalf("the output does not read back as a complete state: %v", err)
	}
}

func TestFormatStateJSON(t *testing.T) {
	// swdd~cli-shall-support-desired-state-json~1
	got, err := FormatState(tree(t, stateYAML), FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "{\n  \"desiredState\": {\n    \"apiVersion\": \"v1\",\n    \"workloads\": {") {
		t.Fatalf("not pretty or not in field order:\n%s", got)
	}
	for _, order := range [][]string{
		{`"desiredState"`, `"workloadStates"`, `"agents"`},
		{`"agent"`, `"tags"`, `"restartPolicy"`, `"runtime"`, `"runtimeConfig"`},
		{`"state"`, `"subState"`, `"additionalInfo"`},
		{`"cpuUsage"`, `"freeMemory"`},
	} {
		last := -1
		for _, k := range order {
			i := strings.Index(got, k)
			if i < last {
				t.Errorf("%s out of order in\n%s", k, got)
			}
			last = i
		}
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if !strings.Contains(got, `"daemon off;\"]\n"`) || strings.Contains(got, `\u003c`) {
		t.Fatalf("string escaping is off:\n%s", got)
	}
}

func TestYAMLKeepsTypesOfAmbiguousStrings(t *testing.T) {
	in := map[string]any{"yes": "yes", "num": "123", "empty": "", "null": "null", "int": int64(5), "list": []any{"on", int64(1)}}
	out, err := EncodeYAML(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := yaml.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"yes", "num", "empty", "null"} {
		if back[k] != in[k] {
			t.Errorf("%s: %#v came back as %#v\n%s", k, in[k], back[k], out)
		}
	}
	if back["int"] != 5 {
		t.Errorf("int came back as %#v", back["int"])
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    Format
		wantErr bool
	}{
		{"yaml", FormatYAML, false},
		{"JSON", FormatJSON, false},
		{"xml", "", true},
		{"", "", true},
	}
	for _, tt := range tests {
		got, err := ParseFormat(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseFormat(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func eventResponse(t *testing.T) *ankbase.CompleteStateResponse {
	cs, err := rpc.CompleteStateFromTree(tree(t, `
workloadStates:
  agent_A:
    web:
      abc: {state: Running, subState: Ok, additionalInfo: ""}
`))
	if err != nil {
		t.Fatal(err)
	}
	return &ankbase.CompleteStateResponse{CompleteState: cs, AlteredFields: &ankbase.AlteredFields{
		UpdatedFields: []string{"workloadStates.agent_A.web.abc"},
	}}
}

func TestFormatEvent(t *testing.T) {
	// swdd~cli-outputs-events-with-timestamp~1
	// swdd~cli-supports-multiple-output-types-for-events~1
	at := time.Date(2026, 8, 13, 10, 11, 12, 345000000, time.UTC)
	ev := EventTree(at, eventResponse(t))
	tests := []struct {
		format Format
		want   string
	}{
		// As ank (serde_yaml): the timestamp is a plain scalar, empty
		// lists of altered fields are left out.
		{FormatYAML, `---
timestamp: 2026-08-13T10:11:12.345+00:00
updatedFields:
  - workloadStates.agent_A.web.abc
completeState:
  workloadStates:
    agent_A:
      web:
        abc:
          state: Running
          subState: Ok
          additionalInfo: ""
`},
		{FormatJSON, `{"timestamp":"2026-08-13T10:11:12.345+00:00","updatedFields":["workloadStates.agent_A.web.abc"],"completeState":{"workloadStates":{"agent_A":{"web":{"abc":{"state":"Running","subState":"Ok","additionalInfo":""}}}}}}
`},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			got, err := FormatEvent(ev, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if _, err := time.Parse(time.RFC3339, string(ev["timestamp"].(plainScalar))); err != nil {
		t.Fatalf("timestamp is not RFC 3339: %v", err)
	}
}

// TestEventTimestamp: the receive time as ank prints it (chrono's
// to_rfc3339 of Utc::now()): UTC, offset "+00:00", and 0, 3, 6 or 9
// fraction digits, as few as show the time exactly.
func TestEventTimestamp(t *testing.T) {
	// swdd~cli-outputs-events-with-timestamp~1
	berlin := time.FixedZone("CEST", 2*60*60)
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{"whole second", time.Date(2026, 8, 13, 10, 11, 12, 0, time.UTC), "2026-08-13T10:11:12+00:00"},
		{"milliseconds", time.Date(2026, 8, 13, 10, 11, 12, 345_000_000, time.UTC), "2026-08-13T10:11:12.345+00:00"},
		{"milliseconds with trailing zeros", time.Date(2026, 8, 13, 10, 11, 12, 100_000_000, time.UTC), "2026-08-13T10:11:12.100+00:00"},
		{"microseconds", time.Date(2026, 8, 13, 10, 11, 12, 345_678_000, time.UTC), "2026-08-13T10:11:12.345678+00:00"},
		{"nanoseconds", time.Date(2026, 8, 13, 10, 11, 12, 345_678_901, time.UTC), "2026-08-13T10:11:12.345678901+00:00"},
		{"small nanoseconds", time.Date(2026, 8, 13, 10, 11, 12, 7, time.UTC), "2026-08-13T10:11:12.000000007+00:00"},
		{"local time is printed in UTC", time.Date(2026, 8, 13, 0, 30, 0, 0, berlin), "2026-08-12T22:30:00+00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EventTimestamp(tt.at); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestEventAlteredFieldsOmittedWhenEmpty: as ank (skip_serializing_if on
// AlteredFields), an empty list of added, updated or removed fields is not
// printed, in YAML or JSON.
func TestEventAlteredFieldsOmittedWhenEmpty(t *testing.T) {
	// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
	// swdd~cli-outputs-events-with-timestamp~1
	at := time.Date(2026, 8, 13, 10, 11, 12, 0, time.UTC)
	tests := []struct {
		name     string
		altered  *ankbase.AlteredFields
		wantYAML string
		wantJSON string
	}{
		{"none", nil, "", ""},
		{"all empty", &ankbase.AlteredFields{AddedFields: []string{}, UpdatedFields: []string{}}, "", ""},
		{"added only", &ankbase.AlteredFields{AddedFields: []string{"agents.a1"}},
			"addedFields:\n  - agents.a1\n", `"addedFields":["agents.a1"],`},
		{"updated only", &ankbase.AlteredFields{UpdatedFields: []string{"agents.a1.status"}},
			"updatedFields:\n  - agents.a1.status\n", `"updatedFields":["agents.a1.status"],`},
		{"removed only", &ankbase.AlteredFields{RemovedFields: []string{"agents.a1"}},
			"removedFields:\n  - agents.a1\n", `"removedFields":["agents.a1"],`},
		{"all three", &ankbase.AlteredFields{AddedFields: []string{"a"}, UpdatedFields: []string{"u"}, RemovedFields: []string{"r"}},
			"addedFields:\n  - a\nupdatedFields:\n  - u\nremovedFields:\n  - r\n", `"addedFields":["a"],"updatedFields":["u"],"removedFields":["r"],`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := EventTree(at, &ankbase.CompleteStateResponse{CompleteState: &ankbase.CompleteState{}, AlteredFields: tt.altered})
			y, err := FormatEvent(ev, FormatYAML)
			if err != nil {
				t.Fatal(err)
			}
			if want := "---\ntimestamp: 2026-08-13T10:11:12+00:00\n" + tt.wantYAML + "completeState: {}\n"; y != want {
				t.Errorf("YAML\n%s\nwant\n%s", y, want)
			}
			j, err := FormatEvent(ev, FormatJSON)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"timestamp":"2026-08-13T10:11:12+00:00",` + tt.wantJSON + `"completeState":{}}` + "\n"; j != want {
				t.Errorf("JSON\n%s\nwant\n%s", j, want)
			}
		})
	}
}

func TestEventWithoutAlteredFields(t *testing.T) {
	resp := eventResponse(t)
	resp.AlteredFields = nil
	ev := EventTree(time.Unix(0, 0), resp)
	for _, k := range []string{"addedFields", "updatedFields", "removedFields"} {
		if _, ok := ev[k]; ok {
			t.Errorf("%s present without altered fields", k)
		}
	}
	if _, ok := ev["completeState"].(state.Tree); !ok {
		t.Errorf("completeState missing: %v", ev)
	}
}

// TestFormatStateOmitsEmptyFields: `get state` (and the complete state of
// an event) leaves out exactly the fields Ankaios' serializer skips when
// they are empty (skip_serializing_if on the ank_base messages): a
// workload's tags, dependencies, configs, files and controlInterfaceAccess
// (with allowRules and denyRules each on their own), a state's configs and
// an agent's tags. What Ankaios always prints stays: apiVersion, an empty
// workloads or agents map, an empty status, additionalInfo "", a rule's
// empty filterMasks, an empty config item.
func TestFormatStateOmitsEmptyFields(t *testing.T) {
	// swdd~cli-shall-support-desired-state-yaml~1
	// swdd~cli-shall-support-desired-state-json~1
	// swdd~server-provides-interface-get-complete-state~2
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty workload collections", `
desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: agent_A
      tags: {}
      dependencies: {}
      restartPolicy: NEVER
      runtime: podman
      runtimeConfig: "image: nginx"
      configs: {}
      files: []
      controlInterfaceAccess: {allowRules: [], denyRules: []}
  configs: {}
`, `desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: agent_A
      restartPolicy: NEVER
      runtime: podman
      runtimeConfig: 'image: nginx'
`},
		{"set collections stay", `
desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: ""
      tags: {owner: me}
      dependencies: {db: ADD_COND_RUNNING}
      configs: {c: cfg}
      files: [{mountPoint: /a, data: x}]
      controlInterfaceAccess:
        allowRules: [{type: StateRule, operation: Read, filterMasks: []}]
        denyRules: [{type: LogRule, workloadNames: []}]
  configs: {cfg: {}, list: []}
`, `desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: ""
      tags:
        owner: me
      dependencies:
        db: ADD_COND_RUNNING
      controlInterfaceAccess:
        allowRules:
          - type: StateRule
            operation: Read
            filterMasks: []
        denyRules:
          - type: LogRule
            workloadNames: []
      configs:
        c: cfg
      files:
        - mountPoint: /a
          data: x
  configs:
    cfg: {}
    list: []
`},
		{"only allow rules", `
desiredState:
  workloads:
    web:
      controlInterfaceAccess:
        allowRules: [{type: LogRule, workloadNames: [db]}]
        denyRules: []
`, `desiredState:
  workloads:
    web:
      controlInterfaceAccess:
        allowRules:
          - type: LogRule
            workloadNames:
              - db
`},
		{"only deny rules", `
desiredState:
  workloads:
    web:
      controlInterfaceAccess:
        allowRules: []
        denyRules: [{type: StateRule, operation: Write, filterMasks: [desiredState]}]
`, `desiredState:
  workloads:
    web:
      controlInterfaceAccess:
        denyRules:
          - type: StateRule
            operation: Write
            filterMasks:
              - desiredState
`},
		{"empty maps Ankaios prints", `
desiredState: {apiVersion: v1, workloads: {}, configs: {}}
workloadStates: {}
agents:
  agent_A: {status: {}, tags: {}}
  agent_B: {tags: {zone: front}}
`, `desiredState:
  apiVersion: v1
  workloads: {}
workloadStates: {}
agents:
  agent_A:
    status: {}
  agent_B:
    tags:
      zone: front
`},
		{"effective state as the desired state", `
effectiveState:
  apiVersion: v1
  workloads:
    web: {agent: agent_A, tags: {}, files: [], controlInterfaceAccess: {allowRules: [], denyRules: []}}
  configs: {}
`, `effectiveState:
  apiVersion: v1
  workloads:
    web:
      agent: agent_A
`},
		{"a masked workload that keeps nothing", `
desiredState:
  apiVersion: v1
  workloads:
    web: {tags: {}}
`, `desiredState:
  apiVersion: v1
  workloads:
    web: {}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tree(t, tt.in)
			before, err := FormatState(in, FormatJSON)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FormatState(in, FormatYAML)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("YAML\n%s\nwant\n%s", got, tt.want)
			}
			// JSON leaves out the same fields.
			var fromJSON, fromYAML any
			if err := json.Unmarshal([]byte(before), &fromJSON); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal([]byte(tt.want), &fromYAML); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromJSON, fromYAML) {
				t.Fatalf("JSON\n%s\nis not the YAML\n%s", before, tt.want)
			}
			// The tree itself is left as it was.
			if !reflect.DeepEqual(in, tree(t, tt.in)) {
				t.Fatalf("FormatState changed its input")
			}
		})
	}
}

// TestEventCompleteStateOmitsEmptyFields: the complete state of an event
// is printed as `get state` prints it; a workload the server sends with
// every collection set but empty (as rpc.StateToProto does) shows none of
// them.
func TestEventCompleteStateOmitsEmptyFields(t *testing.T) {
	// swdd~cli-outputs-events-with-timestamp~1
	// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
	cs := rpc.CompleteStateToProto(&state.CompleteState{DesiredState: state.State{
		APIVersion: "v1",
		Workloads:  map[string]*state.Workload{"web": {Agent: "agent_A", RestartPolicy: state.RestartNever, Runtime: "podman", RuntimeConfig: "image: nginx"}},
	}})
	cs.WorkloadStates, cs.Agents = nil, nil // an event carries only what changed
	ev := EventTree(time.Date(2026, 8, 13, 10, 11, 12, 0, time.UTC), &ankbase.CompleteStateResponse{
		CompleteState: cs, AlteredFields: &ankbase.AlteredFields{AddedFields: []string{"desiredState.workloads.web"}},
	})
	tests := []struct {
		format Format
		want   string
	}{
		{FormatYAML, `---
timestamp: 2026-08-13T10:11:12+00:00
addedFields:
  - desiredState.workloads.web
completeState:
  desiredState:
    apiVersion: v1
    workloads:
      web:
        agent: agent_A
        restartPolicy: NEVER
        runtime: podman
        runtimeConfig: 'image: nginx'
`},
		{FormatJSON, `{"timestamp":"2026-08-13T10:11:12+00:00","addedFields":["desiredState.workloads.web"],"completeState":{"desiredState":{"apiVersion":"v1","workloads":{"web":{"agent":"agent_A","restartPolicy":"NEVER","runtime":"podman","runtimeConfig":"image: nginx"}}}}}
`},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			got, err := FormatEvent(ev, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
