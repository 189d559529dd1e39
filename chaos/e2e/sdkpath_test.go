package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/state"
)

// An unmodified Ankaios SDK application runs as a process workload: it
// finds the control interface at /run/ankaios/control_interface, the
// fixed path of the SDKs (a bind mount in the workload's own mount
// namespace), says Hello and reads its own workload. ANKAIOS_CONTROL_INTERFACE
// still names the agent's directory.
func TestSDKApplicationFindsTheControlInterfaceAtTheFixedPath(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sdkapp")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/sdkapp").CombinedOutput(); err != nil {
		t.Fatalf("building the SDK app: %v\n%s", err, out)
	}
	if err := bench.Passable(filepath.Dir(bin)); err != nil {
		t.Fatal(err)
	}
	e := start(t, map[string][]string{"agent_A": {"process"}})
	e.apply(fmt.Sprintf(`apiVersion: v1
workloads:
  sdk:
    agent: agent_A
    runtime: process
    restartPolicy: NEVER
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads.sdk"]
    runtimeConfig: |
      command: %s
      args: ["sdk"]
  env:
    agent: agent_A
    runtime: process
    restartPolicy: NEVER
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads.env"]
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo \"env=$ANKAIOS_CONTROL_INTERFACE\"; ls /run/ankaios/control_interface"]
`, bin))
	ws := e.waitStates("the SDK app done", map[string]state.ExecutionState{
		"sdk": {State: state.StateSucceeded, SubState: state.SubOk},
		"env": {State: state.StateSucceeded, SubState: state.SubOk},
	})
	if out := e.cli("logs", "sdk"); !strings.Contains(out, "answered through /run/ankaios/control_interface") {
		t.Fatalf("the SDK app said %q", out)
	}
	inst, _ := bench.StateOf(ws, "env")
	dir := filepath.Join(e.agents["agent_A"].RunFolder, "agent_A_io", inst.Instance.String(), "control_interface")
	out := e.cli("logs", "env")
	if !strings.Contains(out, "env="+dir) || !strings.Contains(out, "input") || !strings.Contains(out, "output") {
		t.Fatalf("the workload should see %s in ANKAIOS_CONTROL_INTERFACE and its FIFOs at the fixed path: %q", dir, out)
	}
}
