package flashfs_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/flashfs"
	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// needFUSE skips a test where flashfs cannot mount: it needs root and
// /dev/fuse. With GRAPNEL_REQUIRE_FUSE=1 it fails instead.
func needFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if os.Getuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = err.Error()
	}
	if why == "" {
		return
	}
	if os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1" {
		t.Fatalf("flashfs needs root and /dev/fuse to mount: %s (GRAPNEL_REQUIRE_FUSE=1)", why)
	}
	t.Skipf("flashfs needs root and /dev/fuse to mount: %s", why)
}

// agentRig is one replica on an ordinary disk and one agent whose run
// folder is on a flashfs mount.
type agentRig struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	bins  map[string]string
	gr    *bench.Grapnel
	agent *bench.Agent
	mount *flashfs.Mount
	ns    *sdnotifytest.Socket
}

func (r *agentRig) cli(args ...string) string {
	r.t.Helper()
	full := append([]string{"-k", "--server-url", strings.Join(r.gr.Addrs(), ",")}, args...)
	out, err := exec.CommandContext(r.ctx, r.bins["grapnel"], full...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("grapnel %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (r *agentRig) apply(name, manifest string) {
	r.t.Helper()
	path := filepath.Join(r.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.cli("--no-wait", "apply", path)
}

// waitStates waits until cond accepts the workload states.
func (r *agentRig) waitStates(what string, cond func([]state.WorkloadState) bool) []state.WorkloadState {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, 90*time.Second)
	defer cancel()
	ws, err := bench.WaitStates(ctx, r.gr.Addrs(), what, cond)
	if err != nil {
		r.t.Fatal(err)
	}
	return ws
}

// problem is one problem as `grapnel get problems -o json` prints it.
type problem struct {
	ID      uint64 `json:"id"`
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
	Objects []struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"objects"`
}

// storageProblems are the AgentStorageFailed problems `grapnel get
// problems` lists.
func (r *agentRig) storageProblems() []problem {
	r.t.Helper()
	var out struct {
		Problems []problem `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.cli("get", "problems", "-o", "json")), &out); err != nil {
		r.t.Fatal(err)
	}
	var ps []problem
	for _, p := range out.Problems {
		if p.Kind == "AgentStorageFailed" {
			ps = append(ps, p)
		}
	}
	return ps
}

// waitFor polls cond until it holds.
func (r *agentRig) waitFor(what string, within time.Duration, cond func() bool) {
	r.t.Helper()
	testwait.For(r.t, within, cond, "%s", what)
}

// pids are the host ids ("pid N") of the running workloads, by name.
func (r *agentRig) pids(ws []state.WorkloadState) map[string]string {
	r.t.Helper()
	byInst, err := bench.HostIDs([]*bench.Agent{r.agent}, ws)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]string{}
	for inst, id := range byInst {
		n, _ := state.ParseInstanceName(inst)
		out[n.WorkloadName] = id
	}
	return out
}

// waiting says whether workload wl waits in sub for the run folder, with
// the run folder and the errno's text in its state.
func (r *agentRig) waiting(ws []state.WorkloadState, wl string, st state.ExecState, sub string, errno syscall.Errno) bool {
	s, ok := bench.StateOf(ws, wl)
	info := s.State.AdditionalInfo
	return ok && s.State.State == st && s.State.SubState == sub &&
		strings.Contains(info, "run folder "+r.agent.RunFolder+" failed") && strings.Contains(info, errno.Error()) &&
		strings.Contains(info, "once the run folder works again")
}

const sleeperManifest = `apiVersion: v1
workloads:
  %NAME%:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]
`

func sleeperNamed(name string) string { return strings.ReplaceAll(sleeperManifest, "%NAME%", name) }

func running(ws []state.WorkloadState, names ...string) bool {
	for _, n := range names {
		s, ok := bench.StateOf(ws, n)
		if !ok || s.State.State != state.StateRunning {
			return false
		}
	}
	return true
}

// Requirement (issue 29 point 3, agents): an agent whose run folder fails
// keeps its workloads running, reports the fault, and resumes when
// storage returns. grapnel-server (data on an ordinary disk) and
// grapnel-agent (its run folder on a flashfs mount) run process
// workloads; the mount fills up, then turns read-only as well:
//
//   - the running workloads keep their pids, and the agent runs on;
//   - a workload applied meanwhile is not started and says why
//     (Pending(Starting), the run folder and ENOSPC);
//   - a workload deleted meanwhile is stopped and says why its removal
//     waits (Stopping(DeleteFailed), the run folder and EROFS);
//   - `grapnel get problems` shows AgentStorageFailed naming the agent
//     and the fault, and systemd's STATUS says it;
//
// then the mount heals: the waiting workload runs, the deleted one is
// removed, the problem closes and STATUS is plain again, the pids still
// the same. Last, fsyncs fail with EIO (the PostgreSQL case): a workload
// applied then waits for the run folder too, and runs once fsyncs work.
//
// Before the agent knew its run folder, the workload applied while the
// mount was full was retried on a backoff of up to 5 minutes with
// "Retry N:", no problem was shown, and an agent restarted on the
// read-only mount exited at once (its incarnation counter could not be
// written), which systemd repeats forever.
func TestAgentRunFolderFailsAndComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds grapnel-server, grapnel-agent and grapnel")
	}
	needFUSE(t)
	dir := t.TempDir()
	bins, err := bench.BuildCommands(dir, "grapnel-server", "grapnel-agent", "grapnel")
	if err != nil {
		t.Fatal(err)
	}
	backing, mp := t.TempDir(), t.TempDir()
	g := flashfs.NewGroup(flashfs.Options{Model: flashfs.PerDirectory, Seed: 1, Logf: t.Logf})
	mount, err := g.Mount("agent", backing, mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := &agentRig{t: t, ctx: ctx, dir: dir, bins: bins, mount: mount}
	r.gr, err = bench.StartGrapnel(bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: filepath.Join(dir, "servers"), Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the agent and its workloads end, then the
	// replica, then the mount.
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(r.gr.Close)
	if _, err := r.gr.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	r.ns = sdnotifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", r.ns.Path)
	r.agent, err = bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, RunFolder: filepath.Join(mp, "run"),
		Name: "agent_A", Servers: r.gr.Addrs(), Runtimes: []string{"process"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mount.Heal()
		r.agent.Kill()
		if t.Failed() {
			t.Logf("--- agent log\n%s", bench.LogTail(r.agent.LogPath, 60))
			t.Logf("--- replica log\n%s", bench.LogTail(r.gr.Replicas[0].LogPath, 30))
		}
		bench.RemoveWorkloads([]*bench.Agent{r.agent})
	})
	pid := r.agent.Pid()
	alive := func() {
		t.Helper()
		if err := r.agent.ExitErr(); err != nil || syscall.Kill(pid, 0) != nil {
			t.Fatalf("the agent exited: %v", err)
		}
	}

	r.apply("ticker", `apiVersion: v1
workloads:
  ticker:
    runtime: process
    agent: agent_A
    restartPolicy: ALWAYS
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "while true; do echo tick; sleep 0.2; done"]
`)
	r.apply("keeper", sleeperNamed("keeper"))
	r.apply("doomed", sleeperNamed("doomed"))
	ws := r.waitStates("three workloads running", func(ws []state.WorkloadState) bool { return running(ws, "ticker", "keeper", "doomed") })
	before := r.pids(ws)
	if len(before) != 3 {
		t.Fatalf("host ids %v, want three", before)
	}
	samePids := func(what string, names ...string) {
		t.Helper()
		ws := r.waitStates(what, func(ws []state.WorkloadState) bool { return running(ws, names...) })
		now := r.pids(ws)
		for _, n := range names {
			if now[n] != before[n] {
				t.Fatalf("%s: workload %s was %s, now %q: it was restarted", what, n, before[n], now[n])
			}
		}
	}

	// Full: the ticker's output lines fail to be logged, a new workload
	// cannot be set up.
	mount.SetFull(true)
	r.apply("late", sleeperNamed("late"))
	r.waitStates("late waiting for the run folder (ENOSPC)", func(ws []state.WorkloadState) bool {
		return r.waiting(ws, "late", state.StatePending, state.SubStarting, syscall.ENOSPC)
	})
	r.waitFor("an AgentStorageFailed problem", time.Minute, func() bool { return len(r.storageProblems()) == 1 })
	p := r.storageProblems()[0]
	if len(p.Objects) != 1 || p.Objects[0].Kind != "agent" || p.Objects[0].Name != "agent_A" ||
		!strings.HasPrefix(p.Summary, "Agent agent_A: run folder failed: ") || !strings.Contains(p.Summary, "no space left on device") {
		t.Fatalf("problem %+v", p)
	}
	r.waitFor("STATUS naming the fault", time.Minute, func() bool {
		return strings.Contains(r.ns.Status(), "run folder failed: ") && strings.Contains(r.ns.Status(), "no space left on device")
	})
	samePids("while the run folder is full", "ticker", "keeper", "doomed")
	alive()

	// Read-only as well: a delete stops the workload, but its record
	// stays until the run folder works.
	mount.SetReadOnly(true)
	doomedPid := before["doomed"]
	r.cli("--no-wait", "delete", "workloads", "doomed")
	r.waitStates("doomed stopped, its removal waiting for the run folder (EROFS)", func(ws []state.WorkloadState) bool {
		return r.waiting(ws, "doomed", state.StateStopping, state.SubDeleteFailed, syscall.EROFS)
	})
	if n, err := strconv.Atoi(strings.TrimPrefix(doomedPid, "pid ")); err != nil || syscall.Kill(n, 0) == nil {
		t.Fatalf("the deleted workload (%s) still runs", doomedPid)
	}
	samePids("while the run folder is read-only", "ticker", "keeper")
	if ps := r.storageProblems(); len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("problems %+v, want problem %d still open", ps, p.ID)
	}
	alive()
	if log := bench.LogTail(r.agent.LogPath, 1000); strings.Count(log, "level=ERROR") != 1 ||
		!strings.Contains(log, `level=ERROR msg="run folder failed: the agent keeps its workloads running`) {
		t.Fatalf("the agent's log does not say the fault once at ERROR:\n%s", log)
	}

	// Healed: what waited is done, and the problem closes.
	mount.Heal()
	r.waitStates("late running and doomed removed", func(ws []state.WorkloadState) bool {
		_, doomed := bench.StateOf(ws, "doomed")
		return running(ws, "late") && !doomed
	})
	r.waitFor("the problem to close", time.Minute, func() bool { return len(r.storageProblems()) == 0 })
	r.waitFor("STATUS without the fault", time.Minute, func() bool {
		s := r.ns.Status()
		return strings.HasPrefix(s, "connected to leader ") && !strings.Contains(s, "run folder")
	})
	samePids("after the heal", "ticker", "keeper")
	alive()

	// fsyncs fail with EIO: a write whose fsync failed is not trusted,
	// and the workload waits until the run folder works again.
	if err := mount.AddEIO(flashfs.EIORule{Glob: "**", Fsync: true}); err != nil {
		t.Fatal(err)
	}
	r.apply("after", sleeperNamed("after"))
	r.waitStates("after waiting for the run folder (EIO)", func(ws []state.WorkloadState) bool {
		return r.waiting(ws, "after", state.StatePending, state.SubStarting, syscall.EIO)
	})
	r.waitFor("an AgentStorageFailed problem for the EIO", time.Minute, func() bool {
		ps := r.storageProblems()
		return len(ps) == 1 && strings.Contains(ps[0].Summary, "input/output error")
	})
	mount.Heal()
	r.waitStates("after running", func(ws []state.WorkloadState) bool { return running(ws, "after") })
	r.waitFor("the problem to close", time.Minute, func() bool { return len(r.storageProblems()) == 0 })
	samePids("at the end", "ticker", "keeper")
	alive()
}
