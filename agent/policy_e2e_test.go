package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// execStateOf is the state the leader stores for the workload's instance
// on agent, additionalInfo included; zero while it has none.
func execStateOf(cl *testcluster.Cluster, agent, workload string) state.ExecutionState {
	var out state.ExecutionState
	read(cl, func(st *state.Store) {
		for _, ws := range st.States.OfAgent(agent) {
			if ws.Instance.WorkloadName == workload {
				out = ws.State
			}
		}
	})
	return out
}

// TestWorkloadCannotTakeAnothersUID replays hole 2 of issue 27 end to
// end: a victim process workload runs under its uid of the range, holding
// a secret in its environment and its home directory; an intruder whose
// runtimeConfig names the victim's uid as its `user:` ran as the victim
// and read both (and used its control interface). Now the agent refuses
// to start it, at baseline and at privileged alike (--allow-root-workloads,
// the former name of privileged), and even where the agent lists every
// uid of the range among its --workload-users: its state is Pending(StartingFailed)
// naming runtimeConfig.user, and it never runs.
func TestWorkloadCannotTakeAnothersUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: workloads run under uids of their own (setuid)")
	}
	for _, tc := range []struct {
		name        string
		allowRoot   bool
		first, last uint32
	}{
		{"baseline", false, 61500, 61599},
		{"privileged", true, 61600, 61699},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := testcluster.New(t, 1)
			dir := workDir(t)
			if err := os.Chmod(dir, 0o711); err != nil {
				t.Fatal(err)
			}
			run := filepath.Join(dir, "run")
			startAgent(t, cl, "agent_A", run, func(c *Config) {
				c.WorkloadUIDs = process.UIDRange{First: tc.first, Last: tc.last}
				c.AllowRootWorkloads = tc.allowRoot
				setWorkloadUsers(c, tc.first, tc.last)
			})
			testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
			apply(t, cl, `apiVersion: v1
workloads:
  victim:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo s3cret > $HOME/secret; exec sleep 600"]
      env: {SECRET: s3cret}
`)
			waitState(t, cl, "agent_A", "victim", "Running(Ok)")
			var uids struct{ Workloads map[string]uint32 }
			data, err := os.ReadFile(filepath.Join(run, "workload-uids.json"))
			if err == nil {
				err = json.Unmarshal(data, &uids)
			}
			uid, ok := uids.Workloads["victim"]
			if err != nil || !ok {
				t.Fatalf("the victim's uid: %v (%s)", err, data)
			}
			t.Cleanup(func() { killUID(uid) })
			apply(t, cl, fmt.Sprintf(`apiVersion: v1
workloads:
  intruder:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "cat /proc/$(pgrep -u %d sleep)/environ $HOME/../../*/work/secret; exec sleep 600"]
      user: "%d"
`, uid, uid))
			var got state.ExecutionState
			testwait.For(t, runWithin, func() bool {
				got = execStateOf(cl, "agent_A", "intruder")
				return got.State == state.StateRunning || got.State == state.StateSucceeded || got.State == state.StateFailed ||
					got.Is(state.StatePending, state.SubStartingFailed)
			}, "the intruder started or refused")
			if !got.Is(state.StatePending, state.SubStartingFailed) || !strings.Contains(got.AdditionalInfo, "runtimeConfig.user") ||
				!strings.Contains(got.AdditionalInfo, "belongs to another workload") {
				t.Fatalf("the intruder naming the victim's uid %d is %s (%q), want Pending(StartingFailed) naming runtimeConfig.user", uid, got.Short(), got.AdditionalInfo)
			}
		})
	}
}

// killUID kills what still runs under uid when a test ends: workloads
// outlive the agent by design.
func killUID(uid uint32) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join("/proc", e.Name())); err == nil && fi.Sys().(*syscall.Stat_t).Uid == uid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// setWorkloadUsers lists every uid from first to last as a user a
// workload may name at baseline (--workload-users).
func setWorkloadUsers(c *Config, first, last uint32) {
	for u := first; u <= last; u++ {
		c.WorkloadUsers = append(c.WorkloadUsers, strconv.Itoa(int(u)))
	}
}
