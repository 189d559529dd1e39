package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// TimeToRunning applies one new workload through the leader and returns
// the time from sending the UpdateState to the broadcast that shows its
// instance Running(Ok), as a client with options o sees it. The workload
// is deleted again before it returns.
func TimeToRunning(ctx context.Context, o client.Options, name string, w *state.Workload) (time.Duration, error) {
	c, err := client.Dial(ctx, o)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	states := c.WorkloadStates()
	update := func(ws map[string]*state.Workload) error {
		cs := state.CompleteState{DesiredState: state.State{APIVersion: state.APIVersion, Workloads: ws}}
		_, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
			NewState: rpc.CompleteStateToProto(&cs), UpdateMask: []string{"desiredState.workloads." + name}}}})
		return err
	}
	begin := time.Now()
	if err := update(map[string]*state.Workload{name: w}); err != nil {
		return 0, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = update(nil)
		// Wait for the removal so the next measurement starts clean.
		_, _ = WaitStatesWith(dctx, o, name+" removed", func(ws []state.WorkloadState) bool {
			_, ok := StateOf(ws, name)
			return !ok
		})
	}()
	var last string
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %s not running; last state %s", ErrNotReady, name, last)
		case batch, ok := <-states:
			if !ok {
				return 0, fmt.Errorf("%s: stream ended: %v", name, c.Err())
			}
			for _, p := range batch {
				if p.GetInstanceName().GetWorkloadName() != name {
					continue
				}
				st, err := rpc.ExecutionStateFromProto(p.GetExecutionState())
				if err != nil {
					return 0, err
				}
				last = st.String()
				if st.State == state.StateRunning {
					return time.Since(begin), nil
				}
				if st.Is(state.StatePending, state.SubStartingFailed) || st.State == state.StateFailed {
					return 0, fmt.Errorf("%s: %s", name, st)
				}
			}
		}
	}
}

// RSS returns a process's resident set size in bytes (VmRSS).
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// ApplyWorkloads adds or replaces the given workloads in one UpdateState,
// through the leader.
func ApplyWorkloads(ctx context.Context, addrs []string, ws map[string]*state.Workload) error {
	return ApplyWorkloadsWith(ctx, Insecure(addrs), ws)
}

// ApplyWorkloadsWith is ApplyWorkloads for a client with options o.
func ApplyWorkloadsWith(ctx context.Context, o client.Options, ws map[string]*state.Workload) error {
	c, err := client.Dial(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()
	masks := make([]string, 0, len(ws))
	for n := range ws {
		masks = append(masks, "desiredState.workloads."+n)
	}
	cs := state.CompleteState{DesiredState: state.State{APIVersion: state.APIVersion, Workloads: ws}}
	_, err = c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: rpc.CompleteStateToProto(&cs), UpdateMask: masks}}})
	return err
}
