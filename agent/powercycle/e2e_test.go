package powercycle

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// agentBinEnv names another grapnel-agent build to run the end-to-end test
// against, e.g. an older one to measure what it did after a power cycle.
const agentBinEnv = "GRAPNEL_POWERCYCLE_AGENT"

// domain is one power domain: a pid namespace whose pid 1 is a shell that
// runs a grapnel-server and a grapnel-agent. Killing that pid 1 is a power
// cut: the kernel kills everything in the namespace at once, the
// workloads and their shims included; the server's data directory and the
// agent's run folder stay on disk.
type domain struct {
	cmd  *exec.Cmd // unshare, outside the namespace
	init int       // the namespace's pid 1, as this process sees it
	done chan struct{}
}

// unshareWorks says whether a pid namespace can be made here.
func unshareWorks() error {
	out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func command(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

// powerOn starts a domain running the given commands, their output
// appended to logPath.
func powerOn(t *testing.T, logPath string, cmds ...[]string) *domain {
	t.Helper()
	script := "exec >>" + quote(logPath) + " 2>&1\n"
	for _, c := range cmds {
		script += command(c...) + " &\n"
	}
	script += "wait\n"
	d := &domain{cmd: exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script), done: make(chan struct{})}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.cut(t) })
	testwait.For(t, waitWithin, func() bool {
		d.init = childOf(d.cmd.Process.Pid)
		return d.init > 0
	}, "%v", testwait.Lazy(func() string { return "the namespace's pid 1" }))
	return d
}

// childOf finds a child process of ppid; 0 when there is none yet.
func childOf(ppid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, _ := strconv.Atoi(statField(pid, 4)); p == ppid {
			return pid
		}
	}
	return 0
}

// cut kills the namespace's pid 1 and waits until unshare, which waits
// for it, has ended: by then the kernel has killed everything inside.
func (d *domain) cut(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	if err := syscall.Kill(d.init, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the namespace's pid 1 (%d): %v", d.init, err)
	}
	select {
	case <-d.done:
	case <-time.After(waitWithin):
		t.Fatalf("the power domain did not end within %v of its pid 1's SIGKILL", waitWithin)
	}
}

// TestPowerCycle runs a grapnel-server and a grapnel-agent with three
// process workloads in a pid namespace, cuts the power to all of it at
// once, and powers on again with the same data directory and run folder:
// every workload must come back, started anew, with its add condition
// respected. The kernel's boot id stays the same here (the namespace
// shares the kernel), so the agent recognises the workloads' end by
// their start times: the recorded pids, if they exist at all, are other
// processes now.
func TestPowerCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binaries")
	}
	if err := unshareWorks(); err != nil {
		t.Skipf("no pid namespace here (unshare --pid --fork --mount-proc): %v", err)
	}
	t.Parallel()
	dir := t.TempDir()
	bins, err := bench.BuildCommands(dir, "grapnel-server", "grapnel-agent")
	if err != nil {
		t.Fatal(err)
	}
	agentBin := bins["grapnel-agent"]
	if other := os.Getenv(agentBinEnv); other != "" {
		agentBin = other
	}
	addrs, err := bench.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	runFolder := filepath.Join(dir, "run")
	if err := os.MkdirAll(runFolder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := bench.Passable(runFolder); err != nil {
		t.Fatal(err)
	}
	// Every start of a workload appends its name: how often and in
	// which order they started. The workloads run under uids of their
	// own: the file is one they may all append to.
	starts := filepath.Join(dir, "starts")
	if err := os.WriteFile(starts, nil, 0o600); err != nil || os.Chmod(starts, 0o666) != nil {
		t.Fatal(err)
	}
	server := []string{bins["grapnel-server"], "-k", "--name", "r1", "-a", addrs[0], "--raft-address", addrs[1],
		"--data-dir", filepath.Join(dir, "data"), "--log-level", "info"}
	agent := []string{agentBin, "-k", "--name", "agent_A", "--server-url", addrs[0], "--run-folder", runFolder,
		"--runtimes", "process"}
	logPath := filepath.Join(dir, "domain.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- power domain log\n%s", bench.LogTail(logPath, 80))
		}
	})

	names := []string{"w1", "w2", "w3"}
	ws := map[string]*state.Workload{}
	for _, n := range names {
		ws[n] = &state.Workload{Agent: "agent_A", Runtime: "process", RestartPolicy: state.RestartNever,
			RuntimeConfig: fmt.Sprintf("command: sh\nargs: ['-c', 'echo %s >> %s; exec sleep 3600']\n", n, starts)}
	}
	// w2 starts once w1 runs, after the power cut as before it.
	ws["w2"].Dependencies = map[string]state.AddCondition{"w1": state.AddCondRunning}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	startLog := func() []string {
		b, _ := os.ReadFile(starts)
		return strings.Fields(string(b))
	}
	startsOf := func(n string) int {
		c := 0
		for _, s := range startLog() {
			if s == n {
				c++
			}
		}
		return c
	}
	// waitBack waits until every workload has started `want` times and
	// runs; it returns how many made it.
	waitBack := func(want int) int {
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		defer wcancel()
		back := 0
		_, _ = bench.WaitStates(wctx, []string{addrs[0]}, "workloads running", func(got []state.WorkloadState) bool {
			back = 0
			for _, n := range names {
				s, ok := bench.StateOf(got, n)
				if ok && s.State == state.RunningOk && startsOf(n) == want {
					back++
				}
			}
			return back == len(names)
		})
		return back
	}

	first := powerOn(t, logPath, server, agent)

	testwait.For(t, 30*time.Second, func() bool {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		err = bench.ApplyWorkloads(actx, []string{addrs[0]}, ws)
		return err == nil
	}, "the workloads applied (%v)", testwait.Lazy(func() string { return fmt.Sprint(err) }))
	if n := waitBack(1); n != len(names) {
		t.Fatalf("%d of %d workloads running before the power cut", n, len(names))
	}

	first.cut(t)
	powerOn(t, logPath, server, agent)
	n := waitBack(2)
	t.Logf("after the power cycle %d of %d workloads came back", n, len(names))
	if n != len(names) {
		t.Fatalf("%d of %d workloads came back after the power cycle (starts %v)", n, len(names), startLog())
	}
	again := startLog()[len(names):]
	if slices.Index(again, "w2") < slices.Index(again, "w1") {
		t.Fatalf("after the power cut the workloads started in the order %v: w2 before w1, on which it depends", again)
	}
}
