package containerd

import (
	"context"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd/containerdtest"
	"github.com/grapnel-io/grapnel/state"
)

// After a power cut (daemon, shims and tasks gone, the state directory on
// tmpfs lost, the root kept) the containers are still there without
// tasks: one whose exit the runtime had recorded keeps it, and one that
// succeeded starts again in place with its writable layer; one that ran
// at the cut is Failed(Lost), which the agent replaces.
func TestPowerCycle(t *testing.T) {
	ctdRuntime(t) // skips or fails as the other tests do
	d, err := containerdtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	r, err := New(testConfig(d, 1))
	if err != nil {
		t.Fatal(err)
	}
	agent := testAgent(t)
	initS := spec(t, agent, "init", shConfig("if [ -f /marker ]; then echo again; else touch /marker; echo first; fi"))
	initID := create(t, r, initS)
	bad := create(t, r, spec(t, agent, "bad", shConfig("exit 3")))
	svc := create(t, r, spec(t, agent, "svc", shConfig("exec sleep 1000")))
	failed3 := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit code 3"}
	waitState(t, r, initID, state.SucceededOk)
	waitState(t, r, bad, failed3)
	waitState(t, r, svc, state.RunningOk)

	if err := d.PowerCut(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	booted, err := New(testConfig(d, 1))
	if err != nil {
		t.Fatal(err)
	}
	found, err := booted.List(context.Background(), agent)
	if err != nil || len(found) != 3 {
		t.Fatalf("List after the power cycle = %+v, %v; want the 3 containers", found, err)
	}
	waitState(t, booted, initID, state.SucceededOk)
	waitState(t, booted, bad, failed3)
	st, err := booted.State(context.Background(), svc)
	if err != nil || st.State != state.StateFailed || st.SubState != state.SubLost {
		t.Fatalf("the service that ran at the cut: %v, %v; want Failed(Lost)", st, err)
	}
	if got, err := booted.StartAgain(context.Background(), initID, initS); err != nil || got != initID {
		t.Fatalf("StartAgain after the power cycle = %q, %v", got, err)
	}
	waitLogs(t, booted, initID, "first\nagain\n")
	waitState(t, booted, initID, state.SucceededOk)
}
