package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/state"
)

// The multi-call binary alone runs everything: a replica started as
// `grapnel server`, an agent started as `grapnel agent`, and, with
// grapnel-process-shim a link to it rather than the small shim, the
// agent's process workloads through it as their shim. (The other
// end-to-end tests run the install as `make build` makes it: the links
// grapnel-server and grapnel-agent and the small shim.)
func TestMultiCallBinaryRunsEveryProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel and runs a replica and an agent")
	}
	dir := t.TempDir()
	bins, err := bench.BuildCommands(dir, "grapnel", "grapnel-agent")
	if err != nil {
		t.Fatal(err)
	}
	grapnel, shim := bins["grapnel"], bins["grapnel-process-shim"]
	if err := os.Remove(shim); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("grapnel", shim); err != nil {
		t.Fatal(err)
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: grapnel, Subcommand: "server", Dir: dir, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	var agent *bench.Agent
	t.Cleanup(func() {
		if agent != nil {
			agent.Kill()
		}
		g.Close()
		if t.Failed() {
			t.Logf("--- replica\n%s", bench.LogTail(g.Replicas[0].LogPath, 30))
			if agent != nil {
				t.Logf("--- agent\n%s", bench.LogTail(agent.LogPath, 30))
			}
		}
		if agent != nil {
			bench.RemoveWorkloads([]*bench.Agent{agent})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if _, err := g.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	agent, err = bench.StartAgent(bench.AgentConfig{Bin: grapnel, Subcommand: "agent", Dir: dir, Name: "agent_A",
		Servers: g.Addrs(), Runtimes: []string{"process"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitAttached(wctx, "agent_A"); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(manifest, []byte(addedWorkload("sleeper")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, grapnel, "-k", "--no-wait", "-s", strings.Join(g.Addrs(), ","), "apply", manifest).CombinedOutput(); err != nil {
		t.Fatalf("grapnel apply: %v\n%s", err, out)
	}
	ws, err := bench.WaitStates(ctx, g.Addrs(), "sleeper Running", func(ws []state.WorkloadState) bool {
		s, ok := bench.StateOf(ws, "sleeper")
		return ok && s.State.State == state.StateRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := bench.HostIDs([]*bench.Agent{agent}, ws)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, id := range ids {
		fmt.Sscanf(id, "pid %d", &pid)
	}
	if pid == 0 {
		t.Fatalf("no pid for sleeper: %v", ids)
	}
	// The workload's parent is its shim: the multi-call binary, started
	// through the link grapnel-process-shim.
	shimPID := parentOf(t, pid)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", shimPID))
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(grapnel)
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shimPID))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if exe != want || len(argv) < 2 || argv[0] != shim || argv[1] != "grapnel-process-shim" {
		t.Fatalf("the shim of sleeper (pid %d) runs %s as %q; want %s through %s", shimPID, exe, argv, want, shim)
	}
}

// parentOf is the parent pid of pid, from /proc/<pid>/stat.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state, ppid.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
