package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// Issue 31 point 7: get workloads, agents and configs print -o json and
// yaml with the field names docs/operations.md lists; a table stays the
// default, and another -o is refused by name.
func TestListOutputs(t *testing.T) {
	f := newFakeConn()
	f.answer = func(*ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
	tests := []struct {
		name string
		run  func(*Session, string) error
		want string // the JSON, compacted
	}{
		{"workloads", func(s *Session, o string) error {
			return s.GetWorkloads(context.Background(), WorkloadFilter{Agent: "agent_B"}, o)
		}, `{"workloads":[{"agent":"agent_B","executionState":{"additionalInfo":"  image not found\nretrying  ","state":"Pending","subState":"StartingFailed"},"id":"3333","name":"db","runtime":"containerd"}]}`},
		{"workloads without a state", func(s *Session, o string) error {
			return s.GetWorkloads(context.Background(), WorkloadFilter{Names: []string{"batch"}}, o)
		}, `{"workloads":[{"agent":"agent_C","name":"batch","runtime":"podman"}]}`},
		{"agents", func(s *Session, o string) error { return s.GetAgents(context.Background(), o) },
			`{"agents":[{"cpuUsage":7,"freeMemory":1048576,"name":"agent_A","workloads":2},{"name":"agent_B","workloads":1}]}`},
		{"configs", func(s *Session, o string) error { return s.GetConfigs(context.Background(), o) },
			`{"configs":[{"name":"alpha"},{"name":"zeta"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out, _ := session(f)
			if err := tt.run(s, "json"); err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("-o json is no JSON: %v\n%s", err, out)
			}
			compact, _ := json.Marshal(v)
			if string(compact) != tt.want {
				t.Fatalf("-o json:\n%s\nwant\n%s", compact, tt.want)
			}
			s, out, _ = session(f)
			if err := tt.run(s, "yaml"); err != nil {
				t.Fatal(err)
			}
			y, err := state.ParseTree(out.Bytes())
			if err != nil {
				t.Fatalf("-o yaml: %v\n%s", err, out)
			}
			if compactY, _ := json.Marshal(y); string(compactY) != tt.want {
				t.Fatalf("-o yaml:\n%s\nwant the same as json\n%s", out, tt.want)
			}
			s, out, _ = session(f)
			if err := tt.run(s, ""); err != nil || !strings.Contains(out.String(), "NAME") && !strings.Contains(out.String(), "CONFIG") {
				t.Fatalf("default: %v\n%s", err, out)
			}
			s, _, _ = session(f)
			if err := tt.run(s, "xml"); err == nil || !strings.Contains(err.Error(), `-o "xml": use table, json or yaml`) {
				t.Fatalf("-o xml: %v", err)
			}
		})
	}
}

// Issue 31 point 7: -q prints only the state, without the "# revision:"
// line (YAML) or the revision on stderr (JSON).
func TestGetStateQuietDropsTheRevision(t *testing.T) {
	f := newFakeConn()
	f.answer = func(*ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
	for _, quiet := range []bool{false, true} {
		for _, format := range []Format{FormatYAML, FormatJSON} {
			s, out, errOut := session(f)
			s.Plan = &fakePlan{plan: samplePlan}
			s.Quiet = quiet
			if err := s.GetState(context.Background(), nil, format); err != nil {
				t.Fatal(err)
			}
			shown := strings.Contains(out.String()+errOut.String(), "revision: 4")
			if shown == quiet {
				t.Errorf("quiet %v, format %v: revision shown %v; stdout %q, stderr %q", quiet, format, shown, out.String()[:min(40, out.Len())], errOut)
			}
		}
	}
}

func TestLooksLikeServerAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1:25551": true, "localhost:25551": true, "a:1,b:2": true, "https://s1.example:443/": true, "[::1]:25551": true,
		"running": false, "Pending(Starting)": false, "2026-01-01T00:00:00Z": false, "2026-01-01T10:00:00+01:00": false,
		"00:00": false, "10:20": false, "host:0": false, "host:70000": false, "host:x": false, "": false, "a:1,running": false,
	} {
		if got := LooksLikeServerAddress(s); got != want {
			t.Errorf("LooksLikeServerAddress(%q) = %v, want %v", s, got, want)
		}
	}
}
