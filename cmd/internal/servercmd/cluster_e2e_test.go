package servercmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
)

// The multi-process test runs real binaries: three grapnel-server
// processes on loopback form a cluster (--bootstrap-expect 3), the
// grapnel CLI applies a manifest, the leader gets SIGKILL, and the CLI
// (given every replica's address, the dead one first) keeps working
// against the two survivors: `cluster members` names the new leader in a
// higher term, the manifest reads back, and another applies.

// e2eBuild builds the named commands of this module into a temp dir.
func e2eBuild(t *testing.T, cmds ...string) map[string]string {
	t.Helper()
	bins, err := bench.BuildCommands(t.TempDir(), cmds...)
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

// e2eCLI runs the grapnel CLI insecurely against addrs and returns its
// stdout; a non-zero exit fails the test with everything it printed.
func e2eCLI(t *testing.T, bin string, addrs []string, args ...string) string {
	t.Helper()
	full := append([]string{"-k", "--no-wait", "--server-url", strings.Join(addrs, ",")}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, full...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("grapnel %s: %v after %v\nstdout: %s\nstderr: %s", strings.Join(full, " "), err, time.Since(start), stdout.String(), stderr.String())
	}
	return stdout.String()
}

// e2eGrapnel starts the replicas cfg describes and closes them when the
// test ends, logging the last tail lines of each replica's log if it
// failed. Cleanups registered after it (an agent's) run before it.
func e2eGrapnel(t *testing.T, cfg bench.GrapnelConfig, tail int) *bench.Grapnel {
	t.Helper()
	g, err := bench.StartGrapnel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		if t.Failed() {
			for _, r := range g.Replicas {
				t.Logf("%s", bench.LogTail(r.LogPath, tail))
			}
		}
	})
	return g
}

// e2eWorkloads runs `get state -o json` and returns the runtimeConfig of
// every workload in the desired state.
func e2eWorkloads(t *testing.T, bin string, addrs []string) map[string]string {
	t.Helper()
	out := e2eCLI(t, bin, addrs, "get", "state", "-o", "json", "desiredState.workloads")
	var cs struct {
		DesiredState struct {
			Workloads map[string]struct {
				RuntimeConfig string `json:"runtimeConfig"`
			} `json:"workloads"`
		} `json:"desiredState"`
	}
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatalf("get state -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for name, w := range cs.DesiredState.Workloads {
		got[name] = w.RuntimeConfig
	}
	return got
}

// e2eMembersView is the part of `grapnel cluster members -o json` the
// test checks.
type e2eMembersView struct {
	LeaderID string `json:"leaderId"`
	Term     uint64 `json:"term"`
	Members  []struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	} `json:"members"`
}

func e2eMembers(t *testing.T, bin string, addrs []string) e2eMembersView {
	t.Helper()
	out := e2eCLI(t, bin, addrs, "cluster", "members", "-o", "json")
	var v e2eMembersView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("cluster members -o json: %v\n%s", err, out)
	}
	if len(v.Members) != 3 {
		t.Fatalf("cluster members lists %d members, want 3:\n%s", len(v.Members), out)
	}
	return v
}

func e2eManifest(t *testing.T, dir, name string, workloads map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nworkloads:\n")
	for w, image := range workloads {
		b.WriteString("  " + w + ":\n    agent: agent_A\n    runtime: podman\n    runtimeConfig: |\n      image: " + image + "\n")
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func e2eExpect(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	for w, image := range want {
		if rc, ok := got[w]; !ok || strings.TrimSpace(rc) != "image: "+image {
			t.Fatalf("%s: workload %s has runtimeConfig %q (present %v), want image %s; all: %v", what, w, rc, ok, image, got)
		}
	}
}

func TestClusterSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel-server and grapnel and runs three replicas")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	dir := t.TempDir()
	g := e2eGrapnel(t, bench.GrapnelConfig{
		Bin: bins["grapnel-server"], Dir: dir, Replicas: 3, Extra: []string{"--log-level", "info"},
	}, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 15*time.Second) }

	wctx, wcancel := wait()
	leader, err := g.WaitHealthy(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	cli := bins["grapnel"]
	before := e2eMembers(t, cli, g.Addrs())
	if before.LeaderID != g.Replicas[leader].Name {
		t.Fatalf("cluster members names leader %q, Status named %s", before.LeaderID, g.Replicas[leader].Name)
	}
	first := map[string]string{"web": "nginx", "db": "postgres"}
	e2eCLI(t, cli, g.Addrs(), "apply", e2eManifest(t, dir, "first.yaml", first))
	e2eExpect(t, "after apply", e2eWorkloads(t, cli, g.Addrs()), first)

	g.Kill(leader)
	killed := g.Replicas[leader].Name
	wctx, wcancel = wait()
	next, err := g.WaitLeader(wctx)
	wcancel()
	if err != nil {
		t.Fatalf("after SIGKILL of leader %s: %v", killed, err)
	}
	if next == leader {
		t.Fatalf("killed leader %s is still reported as leader", killed)
	}
	// The dead replica's address comes first: the CLI must get past it.
	addrs := g.LeaderFirst(leader)
	after := e2eMembers(t, cli, addrs)
	if after.LeaderID != g.Replicas[next].Name || after.Term <= before.Term {
		t.Fatalf("after the kill cluster members names leader %q in term %d; want %s in a term above %d",
			after.LeaderID, after.Term, g.Replicas[next].Name, before.Term)
	}
	e2eExpect(t, "after the leader was killed", e2eWorkloads(t, cli, addrs), first)
	second := map[string]string{"cache": "redis"}
	e2eCLI(t, cli, addrs, "apply", e2eManifest(t, dir, "second.yaml", second))
	got := e2eWorkloads(t, cli, addrs)
	e2eExpect(t, "second apply, first manifest", got, first)
	e2eExpect(t, "second apply", got, second)
	t.Logf("leader %s killed; %s took over; the CLI read and applied through the survivors", killed, g.Replicas[next].Name)
}
