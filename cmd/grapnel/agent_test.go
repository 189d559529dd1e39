package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

// The placement test starts workloads through the process runtime, whose
// shim is this test binary.
func TestMain(m *testing.M) {
	process.RunShimIfRequested()
	// The completion test runs this binary as grapnel from bash.
	if os.Getenv(envTestAsCLI) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// cliRun runs the grapnel command line against the cluster.
func cliRun(cl *testcluster.Cluster, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	a.systemAnkConfig = filepath.Join("/nonexistent", "ank.conf")
	a.systemCLIConfig = filepath.Join("/nonexistent", "cli.yaml")
	args = append([]string{"-k", "-s", strings.Join(cl.Addrs(), ",")}, args...)
	code = run(context.Background(), args, a)
	return code, out.String(), errOut.String()
}

// `grapnel agent resync NAME` goes from the command line to the leader
// and on to the agent, which runs a drift repair round; an agent with no
// stream to the leader is refused by name.
func TestAgentResyncEndToEnd(t *testing.T) {
	cl := testcluster.New(t, 1)
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{
			Name: "agent_A", Servers: cl.Addrs(), Insecure: true, RunFolder: t.TempDir(),
			Runtimes: []string{agent.RuntimeProcess},
			Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the agent did not stop")
		}
	})

	var stderr string
	testwait.For(t, 20*time.Second, func() bool {
		var code int
		code, _, stderr = cliRun(cl, "agent", "resync", "agent_A")
		return code == exitOK
	}, "grapnel agent resync agent_A to succeed")
	if !strings.Contains(stderr, "asked agent agent_A for a drift repair round") {
		t.Fatalf("stderr %q", stderr)
	}
	testwait.For(t, 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, "the server asks for a drift repair round") && strings.Contains(l, "resync round")
	}, "the agent to run the round")

	code, _, stderr := cliRun(cl, "agent", "resync", "agent_B")
	if code != exitError || !strings.Contains(stderr, `agent "agent_B" has no stream open to the leader`) {
		t.Fatalf("resync of an absent agent: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := cliRun(cl, "agent", "resync"); code != exitError || !strings.Contains(stderr, "accepts 1 arg") {
		t.Fatalf("resync without a name: exit %d, stderr %q", code, stderr)
	}
}

// `grapnel agent maintenance|disable|activate NAME` reach the leader and
// are committed; `grapnel get agents` shows the mode, also of an agent
// that is not connected (here one a workload names before it ever
// connects). A name the cluster knows nothing of is refused (a typo).
func TestAgentModesEndToEnd(t *testing.T) {
	cl := testcluster.New(t, 1)
	manifest := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nworkloads:\n  w:\n    runtime: process\n    agent: agent_M\n    runtimeConfig: \"command: [/bin/true]\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr string
	testwait.For(t, 20*time.Second, func() bool {
		var code int
		code, _, stderr = cliRun(cl, "--no-wait", "apply", manifest)
		return code == exitOK
	}, "grapnel apply to succeed")
	code, _, stderr := cliRun(cl, "agent", "disable", "agent_m")
	if code != exitError || !strings.Contains(stderr, "NotFound") || !strings.Contains(stderr, `agent "agent_m": the cluster knows no agent of that name`) {
		t.Fatalf("disable of an unknown agent: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = cliRun(cl, "agent", "maintenance", "agent_M"); code != exitOK {
		t.Fatalf("maintenance: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stderr, "agent agent_M is Maintenance") {
		t.Fatalf("stderr %q", stderr)
	}
	code, out, stderr := cliRun(cl, "get", "agents")
	if code != exitOK || !strings.Contains(out, "MODE") || !strings.Contains(out, "Maintenance (disconnected)") {
		t.Fatalf("get agents: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, _, stderr := cliRun(cl, "agent", "disable", "agent_M"); code != exitOK {
		t.Fatalf("disable: exit %d, stderr %q", code, stderr)
	}
	if _, out, _ := cliRun(cl, "get", "agents"); !strings.Contains(out, "Disabled (disconnected)") {
		t.Fatalf("get agents after disable: %q", out)
	}
	if code, _, stderr := cliRun(cl, "agent", "activate", "agent_M"); code != exitOK {
		t.Fatalf("activate: exit %d, stderr %q", code, stderr)
	}
	if _, out, _ := cliRun(cl, "get", "agents"); strings.Contains(out, "agent_M") {
		t.Fatalf("an Active agent that is not connected is still listed: %q", out)
	}
	if code, _, stderr := cliRun(cl, "agent", "disable", "bad.name"); code != exitError || !strings.Contains(stderr, "bad.name") {
		t.Fatalf("bad name: exit %d, stderr %q", code, stderr)
	}
}

// A placed workload runs on real agents of two risk groups; `grapnel
// agent disable` drains one, and the instance runs on the third agent.
func TestPlacedWorkloadOnRealAgents(t *testing.T) {
	cl := testcluster.New(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var running []chan error
	for _, a := range []struct{ name, group string }{{"agent_A", "rg1"}, {"agent_B", "rg2"}, {"agent_C", "rg3"}} {
		done := make(chan error, 1)
		running = append(running, done)
		go func() {
			done <- agent.Run(ctx, agent.Config{
				Name: a.name, Servers: cl.Addrs(), Insecure: true, RunFolder: t.TempDir(),
				Runtimes: []string{agent.RuntimeProcess}, Tags: map[string]string{"grapnel.io/risk-group": a.group},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
		}()
	}
	t.Cleanup(func() {
		cancel()
		for _, done := range running {
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Error("an agent did not stop")
			}
		}
	})
	dir := t.TempDir()
	m := filepath.Join(dir, "placed.yaml")
	if err := os.WriteFile(m, []byte(`apiVersion: v1
workloads:
  sleeper:
    runtime: process
    agent: ""
    tags:
      grapnel.io/instances: "2"
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, func() bool {
		_, out, _ := cliRun(cl, "get", "agents")
		return strings.Count(out, "agent_") == 3
	}, "three agents")
	if code, _, stderr := cliRun(cl, "--no-wait", "apply", m); code != exitOK {
		t.Fatalf("apply: exit %d, stderr %q", code, stderr)
	}
	// Workloads outlive their agent by design: delete them while the
	// agents still run (cleanups run last registered first).
	t.Cleanup(func() {
		cliRun(cl, "--no-wait", "delete", "workload", "sleeper")
		testwait.For(t, 20*time.Second, func() bool {
			_, out, _ := cliRun(cl, "get", "workloads")
			return !strings.Contains(out, "sleeper")
		}, "sleeper deleted everywhere")
	})
	runningOn := func(agents ...string) func() bool {
		return func() bool {
			_, out, _ := cliRun(cl, "get", "workloads")
			lines := 0
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "sleeper") {
					lines++
				}
			}
			if lines != len(agents) {
				return false
			}
			for _, a := range agents {
				if !strings.Contains(out, a) {
					return false
				}
			}
			return strings.Count(out, "Running") == len(agents)
		}
	}
	testwait.For(t, 30*time.Second, runningOn("agent_A", "agent_B"), "sleeper running on agent_A and agent_B")
	if code, _, stderr := cliRun(cl, "agent", "disable", "agent_B"); code != exitOK {
		t.Fatalf("disable: exit %d, stderr %q", code, stderr)
	}
	testwait.For(t, 30*time.Second, runningOn("agent_A", "agent_C"), "sleeper moved from agent_B to agent_C")
}
