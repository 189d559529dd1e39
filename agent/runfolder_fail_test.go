package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/sdnotify"
	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// readOnly bind-mounts dir read-only over itself, so that every change in
// it fails with EROFS as on an ext4 remounted read-only after an error;
// the returned function makes it writable again. It needs root (skipped
// otherwise).
func readOnly(t *testing.T, dir string) (heal func()) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("a read-only bind mount needs root: %v", err)
		}
		t.Fatal(err)
	}
	mounted := true
	heal = func() {
		if mounted {
			mounted = false
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	}
	t.Cleanup(heal)
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	return heal
}

// storageProblem is the open AgentStorageFailed problem of agent; nil
// when there is none.
func storageProblem(cl *testcluster.Cluster, agent string) *state.Problem {
	var out *state.Problem
	read(cl, func(st *state.Store) {
		for _, p := range st.Problems.Open {
			if p.Kind == string(problems.AgentStorageFailed) && len(p.Objects) == 1 && p.Objects[0].Name == agent {
				out = p
			}
		}
	})
	return out
}

// infoOf is the additional info the leader stores for the workload's
// instance on agent.
func infoOf(cl *testcluster.Cluster, agent, workload string) string {
	var out string
	read(cl, func(st *state.Store) {
		for _, ws := range st.States.OfAgent(agent) {
			if ws.Instance.WorkloadName == workload {
				out = ws.State.AdditionalInfo
			}
		}
	})
	return out
}

// Requirement (issue 29 point 3, agents): an agent whose run folder fails
// keeps its workloads running, reports the fault, and resumes when
// storage returns. Here the run folder turns read-only under a running
// agent with a process workload: the workload runs on (same pid), a
// workload applied meanwhile waits and says why (the run folder and
// EROFS), the leader opens an AgentStorageFailed problem and systemd's
// STATUS says it; the agent restarts while the run folder is still
// read-only and runs on with an incarnation it cannot store yet (before
// this, it exited at start, and systemd would have restarted it in a
// loop); once the run folder is writable again the waiting workload runs,
// the new incarnation is written, the problem closes and STATUS is plain.
func TestAgentRunsOnWhenItsRunFolderFails(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a read-only bind mount needs root")
	}
	ns := sdnotifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", ns.Path)
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	run := filepath.Join(dir, "run")
	first, second := filepath.Join(dir, "first.pid"), filepath.Join(dir, "second.pid")
	killAtEnd(t, first)
	killAtEnd(t, second)
	fast := func(c *Config) {
		c.StorageProbeMin, c.StorageProbeMax = 20*time.Millisecond, 200*time.Millisecond
		c.Notify = sdnotify.New(slog.Default())
	}
	a := startAgent(t, cl, "agent_A", run, fast)
	apply(t, cl, sleeper("first", "agent_A", first))
	waitState(t, cl, "agent_A", "first", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, first)) }, "the first workload's pid file")
	pid := pidOf(t, first)

	heal := readOnly(t, run)
	apply(t, cl, sleeper("second", "agent_A", second))
	testwait.For(t, runWithin, func() bool {
		info := infoOf(cl, "agent_A", "second")
		return stateOf(cl, "agent_A", "second") == "Pending(Starting)" && strings.Contains(info, "read-only file system") &&
			strings.Contains(info, "run folder "+run+" failed") && strings.HasSuffix(info, "it starts once the run folder works again")
	}, "the second workload waiting for the run folder (now %s %q)", stateOf(cl, "agent_A", "second"), infoOf(cl, "agent_A", "second"))
	testwait.For(t, runWithin, func() bool { return storageProblem(cl, "agent_A") != nil }, "an AgentStorageFailed problem")
	if p := storageProblem(cl, "agent_A"); !strings.Contains(p.Summary, "Agent agent_A: run folder failed: ") || !strings.Contains(p.Summary, "read-only file system") {
		t.Fatalf("problem summary %q", p.Summary)
	}
	testwait.For(t, connectWithin, func() bool {
		return strings.Contains(ns.Status(), "run folder failed: ") && strings.Contains(ns.Status(), "read-only file system")
	}, "STATUS naming the fault (now %q)", ns.Status())
	if got := strings.Count(a.logs.String(), "level=ERROR"); got != 1 {
		t.Fatalf("%d ERROR lines, want the fault once:\n%s", got, a.logs.String())
	}

	// A restart while it fails: the agent runs, says hello with a new
	// incarnation it cannot store, and tells the fault again. (Its clean
	// stop said Goodbye, so the leader may take it for gone, and close
	// the problem, before the new hello opens it again.)
	a.stop(t)
	b := startAgent(t, cl, "agent_A", run, fast)
	if b.conn.incarnation <= a.conn.incarnation {
		t.Fatalf("incarnation %d after %d", b.conn.incarnation, a.conn.incarnation)
	}
	if f := b.storage.Short(); f != "replace agent_A.incarnation: read-only file system" {
		t.Fatalf("the restarted agent's fault is %q", f)
	}
	testwait.For(t, connectWithin, func() bool { return b.conn.replica() != "" }, "the restarted agent connected")
	testwait.For(t, runWithin, func() bool { return storageProblem(cl, "agent_A") != nil }, "the restarted agent's fault as a problem")
	if got := pidOf(t, first); got != pid || !alive(pid) {
		t.Fatalf("the first workload was restarted or stopped: pid %d, then %d (alive %v)", pid, got, alive(pid))
	}

	heal()
	waitState(t, cl, "agent_A", "second", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return storageProblem(cl, "agent_A") == nil }, "the problem to close")
	testwait.For(t, connectWithin, func() bool { return !strings.Contains(ns.Status(), "run folder") }, "STATUS without the fault (now %q)", ns.Status())
	data, err := os.ReadFile(incarnationPath(run, "agent_A"))
	if err != nil || strings.TrimSpace(string(data)) != strconv.FormatUint(b.conn.incarnation, 10) {
		t.Fatalf("counter file %q, %v; want the restarted agent's %d written once the run folder works", data, err, b.conn.incarnation)
	}
	if got := pidOf(t, first); got != pid || !alive(pid) {
		t.Fatalf("the first workload was restarted or stopped: pid %d, then %d (alive %v)", pid, got, alive(pid))
	}
	if s := stateOf(cl, "agent_A", "first"); s != "Running(Ok)" {
		t.Fatalf("the first workload is %s", s)
	}
}
