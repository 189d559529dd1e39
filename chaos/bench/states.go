package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// WorkloadStates reads the workload states through the leader-aware
// client: one short-lived CLI stream per call, so a call after a failover
// finds the new leader.
func WorkloadStates(ctx context.Context, addrs []string) ([]state.WorkloadState, error) {
	return WorkloadStatesWith(ctx, Insecure(addrs))
}

// Insecure is the client options of an insecure cluster at addrs.
func Insecure(addrs []string) client.Options { return client.Options{Addrs: addrs, Insecure: true} }

// WorkloadStatesWith is WorkloadStates for a client with options o (a
// cluster with mutual TLS).
func WorkloadStatesWith(ctx context.Context, o client.Options) ([]state.WorkloadState, error) {
	c, err := client.Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	resp, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"workloadStates"}}}})
	if err != nil {
		return nil, err
	}
	return statesOf(resp)
}

// statesOf reads the workload states from the answer to a complete state
// request.
func statesOf(resp *ankbase.Response) ([]state.WorkloadState, error) {
	if resp.GetCompleteStateResponse() == nil {
		return nil, fmt.Errorf("answered %v", resp)
	}
	var out []state.WorkloadState
	m := resp.GetCompleteStateResponse().GetCompleteState().GetWorkloadStates().GetAgentStateMap()
	for agent, wls := range m {
		for wl, ids := range wls.GetWlNameStateMap() {
			for id, es := range ids.GetIdStateMap() {
				st, err := rpc.ExecutionStateFromProto(es)
				if err != nil {
					return nil, fmt.Errorf("state of %s.%s.%s: %w", wl, id, agent, err)
				}
				out = append(out, state.WorkloadState{Instance: state.InstanceName{WorkloadName: wl, AgentName: agent, ID: id}, State: st})
			}
		}
	}
	return out, nil
}

// WaitStates polls the workload states until cond accepts them; on timeout
// the error shows the last states seen.
func WaitStates(ctx context.Context, addrs []string, what string, cond func([]state.WorkloadState) bool) ([]state.WorkloadState, error) {
	return WaitStatesWith(ctx, Insecure(addrs), what, cond)
}

// WaitStatesWith is WaitStates for a client with options o.
func WaitStatesWith(ctx context.Context, o client.Options, what string, cond func([]state.WorkloadState) bool) ([]state.WorkloadState, error) {
	var last []state.WorkloadState
	var lastErr error
	for {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ws, err := WorkloadStatesWith(qctx, o)
		cancel()
		if err == nil {
			last, lastErr = ws, nil
			if cond(ws) {
				return ws, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w: %s: last states %s (last error %v)", ErrNotReady, what, FormatStates(last), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FormatStates prints states one per line as `instance: State(Sub)`.
func FormatStates(ws []state.WorkloadState) string {
	var b strings.Builder
	for _, s := range ws {
		fmt.Fprintf(&b, "\n  %s: %s", s.Instance, s.State)
	}
	return b.String()
}

// StateOf returns the state of the one instance of workload wl in ws
// whose state is not Removed; ok is false if there is none or several.
func StateOf(ws []state.WorkloadState, wl string) (state.WorkloadState, bool) {
	var found []state.WorkloadState
	for _, s := range ws {
		if s.Instance.WorkloadName == wl {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return state.WorkloadState{}, false
	}
	return found[0], true
}
