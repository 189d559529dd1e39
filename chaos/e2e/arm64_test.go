package e2e

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// arm64Env turns the aarch64 smoke test on; scripts/arm64-smoke.sh (make
// smoke-arm64, which CI runs) sets it after setting up qemu-user.
const arm64Env = "GRAPNEL_ARM64_SMOKE"

// aarch64 is a target of its own (vehicle central compute): the install
// built for arm64 (`make build-arm64`), run under qemu-user through
// binfmt_misc, does what TestWorkloadsSurviveLeaderKill checks on this
// machine's architecture: three replicas and two agents, process
// workloads Running, the leader SIGKILLed, no workload restarted or
// seen AgentDisconnected, an update carried out afterwards. The
// replicas run as `grapnel server` and the agents as the link
// grapnel-agent, whose shim is the link grapnel-process-shim.
func TestArm64WorkloadsSurviveLeaderKill(t *testing.T) {
	if os.Getenv(arm64Env) != "1" {
		t.Skip(arm64Env + " is not 1: scripts/arm64-smoke.sh (make smoke-arm64) sets up qemu-user and runs this test")
	}
	if runtime.GOARCH == "arm64" {
		t.Log("this machine is arm64: the binaries run natively")
	}
	begin := time.Now()
	e := startWith(t, startOptions{goarch: "arm64", serverSubcommand: true, runnable: func(bins map[string]string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bins["grapnel"], "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "grapnel ") {
			t.Fatalf("the arm64 build does not run here (qemu-user with binfmt_misc: scripts/arm64-smoke.sh sets it up): %v\n%s", err, out)
		}
	}}, map[string][]string{"agent_A": {"process"}, "agent_B": {"process"}})
	t.Logf("arm64: built, 3 replicas healthy and 2 agents attached in %v", time.Since(begin).Round(time.Millisecond))
	leaderKillRestartsNothing(e, false)
	t.Logf("arm64 smoke test: %v in all", time.Since(begin).Round(time.Millisecond))
}
