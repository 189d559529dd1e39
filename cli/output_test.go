package cli

import (
	"encoding/json"
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
  configs: {}
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
    tags: {}
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
		{FormatYAML, `---
timestamp: "2026-08-13T10:11:12.345Z"
addedFields: []
updatedFields:
  - workloadStates.agent_A.web.abc
removedFields: []
completeState:
  workloadStates:
    agent_A:
      web:
        abc:
          state: Running
          subState: Ok
          additionalInfo: ""
`},
		{FormatJSON, `{"timestamp":"2026-08-13T10:11:12.345Z","addedFields":[],"updatedFields":["workloadStates.agent_A.web.abc"],"removedFields":[],"completeState":{"workloadStates":{"agent_A":{"web":{"abc":{"state":"Running","subState":"Ok","additionalInfo":""}}}}}}
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
	if _, err := time.Parse(time.RFC3339, ev["timestamp"].(string)); err != nil {
		t.Fatalf("timestamp is not RFC 3339: %v", err)
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
