package agent

import (
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

func TestAnswerWithoutRuntimes(t *testing.T) {
	inst := state.NewInstanceName("w", "a", "cfg")
	del := state.NewInstanceName("old", "a", "x")
	w := &state.Workload{Runtime: "podman", RuntimeConfig: "cfg"}
	m := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: &grpcapi.UpdateWorkload{
		AddedWorkloads:   []*grpcapi.AddedWorkload{rpc.AddedWorkloadToProto(inst, w)},
		DeletedWorkloads: []*grpcapi.DeletedWorkload{rpc.DeletedWorkloadToProto(del, nil)},
	}}}
	got := answer("a", m)
	if len(got) != 2 || got[0].Instance != del || !got[0].State.IsRemoved() {
		t.Fatalf("deletion answered %v", got)
	}
	if got[1].Instance != inst || !got[1].State.Is(state.StatePending, state.SubStartingFailed) || got[1].State.AdditionalInfo == "" {
		t.Fatalf("addition answered %v", got[1])
	}
}

func TestCPUPercent(t *testing.T) {
	if p := cpuPercent(cpuSample{work: 10, total: 100}, cpuSample{work: 60, total: 200}); p != 50 {
		t.Fatalf("cpu %d%%", p)
	}
	if p := cpuPercent(cpuSample{total: 5}, cpuSample{total: 5}); p != 0 {
		t.Fatalf("no time passed gives %d%%", p)
	}
	if _, ok := readCPU(); !ok {
		t.Skip("/proc/stat not readable")
	}
	if freeMemory() == 0 {
		t.Fatal("MemAvailable not read")
	}
}
