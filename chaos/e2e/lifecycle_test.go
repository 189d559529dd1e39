package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/state"
)

// Changing only a workload's restartPolicy keeps its instance name: the
// update deletes and adds the same instance, and `grapnel apply` waits
// for its Removed and for the new life. The agent's and the leader's
// conflation must deliver that Removed although Pending(Starting) follows
// it at once; before they did, the CLI waited forever in 5 of 8 runs.
func TestRestartPolicyChangesReturn(t *testing.T) {
	e := start(t, map[string][]string{"agent_A": {"process"}})
	manifest := func(policy string) string {
		return fmt.Sprintf(`apiVersion: v1
workloads:
  sleeper:
    agent: agent_A
    runtime: process
    restartPolicy: %s
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]
`, policy)
	}
	e.apply(manifest("NEVER"))
	e.waitStates("sleeper running", map[string]state.ExecutionState{"sleeper": running})
	policies := []string{"ALWAYS", "ON_FAILURE", "NEVER"}
	for i := range 20 {
		path := filepath.Join(e.dir, fmt.Sprintf("policy-%d.yaml", i))
		if err := os.WriteFile(path, []byte(manifest(policies[i%len(policies)])), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		args := []string{"-k", "--server-url", strings.Join(e.g.Addrs(), ","), "apply", path}
		out, err := exec.CommandContext(ctx, e.bins["grapnel"], args...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("change %d (restartPolicy %s): grapnel apply did not return in 30 s:\n%s", i+1, policies[i%len(policies)], out)
		}
		if err != nil {
			t.Fatalf("change %d: grapnel apply: %v\n%s", i+1, err, out)
		}
	}
	e.waitStates("sleeper running at the end", map[string]state.ExecutionState{"sleeper": running})
}
