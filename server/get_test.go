package server

import (
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// swdd~server-provides-interface-get-complete-state~2
// swdd~server-filters-get-complete-state-result~2
// swdd~server-filters-get-complete-state-result-with-wildcards~1
// swdd~server-includes-id-in-control-interface-response~1
func TestGetCompleteStateMasks(t *testing.T) {
	m := `
apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    configs: {c: cfg}
    runtimeConfig: "image: {{c.image}}"
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
configs:
  cfg: {image: nginx}
`
	ts := startServer(t, mustState(t, m))
	ts.agent("agent_A", nil)
	cli := ts.cli()
	full := cli.get()
	if full.GetDesiredState().GetWorkloads().GetWorkloads()["web"].GetRuntimeConfig() != "image: {{c.image}}" {
		t.Fatal("desired state is not returned unrendered")
	}
	if len(full.GetAgents().GetAgents()) != 1 || len(full.GetWorkloadStates().GetAgentStateMap()) != 1 {
		t.Fatalf("complete state lacks agents or states: %v", full)
	}
	one := cli.get("desiredState.workloads.web.agent")
	wls := one.GetDesiredState().GetWorkloads().GetWorkloads()
	if len(wls) != 1 || wls["web"].GetAgent() != "agent_A" || wls["web"].Runtime != nil {
		t.Fatalf("masked result %v", one)
	}
	if one.GetDesiredState().GetApiVersion() != state.APIVersion {
		t.Fatal("apiVersion not added to a desiredState mask")
	}
	if one.GetWorkloadStates() != nil || one.GetAgents() != nil {
		t.Fatal("unrequested parts returned")
	}
	wild := cli.get("workloadStates.*.*.*.state")
	n := 0
	for _, wl := range wild.GetWorkloadStates().GetAgentStateMap() {
		for _, ids := range wl.GetWlNameStateMap() {
			for _, s := range ids.GetIdStateMap() {
				n++
				if s.GetPending() != ankbase.Pending_PENDING_INITIAL || s.ExecutionStateEnum == nil {
					t.Fatalf("state %v", s)
				}
			}
		}
	}
	if n != 2 {
		t.Fatalf("wildcard matched %d states, want 2", n)
	}
	if missing := cli.get("desiredState.workloads.nope"); len(missing.GetDesiredState().GetWorkloads().GetWorkloads()) != 0 {
		t.Fatalf("mask to a missing field returned %v", missing)
	}
	r := cli.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}})
	if r.GetRequestId() == "" {
		t.Fatal("response without the request id")
	}
}
