package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd/containerdtest"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// startContainerd starts a private containerd for one test, or skips;
// with GRAPNEL_REQUIRE_CONTAINERD=1 (as .ci/run sets) it fails instead.
func startContainerd(t *testing.T) *containerdtest.Daemon {
	t.Helper()
	if why := containerdtest.Missing(); why != "" {
		if os.Getenv(containerdtest.RequireEnv) == "1" {
			t.Fatalf("containerd is not usable and %s=1: %s", containerdtest.RequireEnv, why)
		}
		t.Skip("containerd not set up: " + why)
	}
	d, err := containerdtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d
}

// containerdSleeper is a containerd workload that sleeps, with extra
// commandOptions.
func containerdSleeper(name, agent string, policy state.RestartPolicy, opts string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  %s:
    runtime: containerd
    agent: %s
    restartPolicy: %s
    runtimeConfig: |
      image: %s
      commandOptions: [%s]
      commandArgs: [sleep, "600"]
`, name, agent, policy, containerdtest.Image, opts)
}

// ctdContainerOf is the id of the container containerd holds for inst,
// "" when none.
func ctdContainerOf(d *containerdtest.Daemon, inst state.InstanceName) string {
	out, err := d.Ctr("containers", "ls", "-q", fmt.Sprintf("labels.name==%q", inst.String()))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func ctdAgentName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "ctd_" + hex.EncodeToString(b[:])
}

// A containerd workload runs through the agent and is adopted by the
// next agent: the same container, never restarted.
func TestContainerdWorkloadAdoptedAcrossAgentRestart(t *testing.T) {
	d := startContainerd(t)
	name := ctdAgentName()
	cl := testcluster.New(t, 1)
	run := filepath.Join(workDir(t), "run")
	withCtd := func(c *Config) {
		c.Runtimes = []string{RuntimeContainerd}
		c.Containerd = containerd.Config{Address: d.Address, DataRoot: d.NerdctlRoot, CNINetconfPath: d.NetConf}
	}
	first := startAgent(t, cl, name, run, withCtd)
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected", name)
	apply(t, cl, containerdSleeper("svc", name, state.RestartNever, `"-e", "A=1"`))
	const within = 60 * time.Second
	testwait.For(t, within, func() bool { return stateOf(cl, name, "svc") == "Running(Ok)" }, "svc Running(Ok)")
	_, inst := stateFull(cl, name, "svc")
	id := ctdContainerOf(d, inst)
	if id == "" {
		t.Fatalf("no container for %s", inst)
	}

	first.stop(t)
	startAgent(t, cl, name, run, withCtd)
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected again", name)
	testwait.For(t, within, func() bool { return stateOf(cl, name, "svc") == "Running(Ok)" }, "svc Running(Ok) after the restart")
	if now := ctdContainerOf(d, inst); now != id {
		t.Fatalf("container %q after the agent restart, want %s adopted", now, id)
	}
	if out, err := d.Ctr("tasks", "ls"); err != nil || !strings.Contains(out, id) || !strings.Contains(out, "RUNNING") {
		t.Fatalf("the adopted container's task: %v\n%s", err, out)
	}
}

// The agent's own --workload-policy judges containerd workloads before
// containerd sees them: at restricted (the servers' baseline admits it) a
// containerd workload is Pending(StartingFailed) naming the field and the
// level, since the policy does not judge nerdctl's --user yet; no container
// is made.
func TestContainerdAgentPolicyRefuses(t *testing.T) {
	d := startContainerd(t)
	name := ctdAgentName()
	cl := testcluster.New(t, 1)
	startAgent(t, cl, name, filepath.Join(workDir(t), "run"), func(c *Config) {
		c.Runtimes = []string{RuntimeContainerd}
		c.Containerd = containerd.Config{Address: d.Address, DataRoot: d.NerdctlRoot, CNINetconfPath: d.NetConf}
		c.WorkloadPolicy = workloadpolicy.Restricted
	})
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected", name)
	apply(t, cl, containerdSleeper("plain", name, state.RestartNever, `"--cap-drop=ALL"`))
	testwait.For(t, 60*time.Second, func() bool {
		s := execStateOf(cl, name, "plain")
		return s.Is(state.StatePending, state.SubStartingFailed) &&
			strings.Contains(s.AdditionalInfo, "runtimeConfig.commandOptions") && strings.Contains(s.AdditionalInfo, "restricted") &&
			strings.Contains(s.AdditionalInfo, "--user yet")
	}, "the workload refused by the agent's policy (state %v)", testwait.Lazy(func() string { return fmt.Sprint(execStateOf(cl, name, "plain")) }))
	if _, inst := stateFull(cl, name, "plain"); ctdContainerOf(d, inst) != "" {
		t.Fatal("the refused workload has a container")
	}
}

// Drift through the agent: a task deleted behind its back (ALWAYS) runs
// again in a new container; a container removed behind its back (NEVER)
// is Failed(Lost) with the drift reason; a container with the agent's
// labels that nobody asked for is removed by a resync.
func TestContainerdDriftRepaired(t *testing.T) {
	d := startContainerd(t)
	name := ctdAgentName()
	cl := testcluster.New(t, 1)
	startAgent(t, cl, name, filepath.Join(workDir(t), "run"), func(c *Config) {
		c.Runtimes = []string{RuntimeContainerd}
		c.Containerd = containerd.Config{Address: d.Address, DataRoot: d.NerdctlRoot, CNINetconfPath: d.NetConf}
	})
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected", name)
	apply(t, cl, containerdSleeper("keeper", name, state.RestartAlways, ""))
	apply(t, cl, containerdSleeper("loner", name, state.RestartNever, ""))
	const within = 60 * time.Second
	ids := map[string]string{}
	for _, w := range []string{"keeper", "loner"} {
		testwait.For(t, within, func() bool { return stateOf(cl, name, w) == "Running(Ok)" }, "%s Running(Ok)", w)
		_, inst := stateFull(cl, name, w)
		if ids[w] = ctdContainerOf(d, inst); ids[w] == "" {
			t.Fatalf("no container for %s", inst)
		}
	}
	if out, err := d.Ctr("tasks", "delete", "--force", ids["keeper"]); err != nil {
		t.Fatalf("ctr tasks delete: %v: %s", err, out)
	}
	if out, err := d.Ctr("tasks", "delete", "--force", ids["loner"]); err != nil {
		t.Fatalf("ctr tasks delete: %v: %s", err, out)
	}
	if out, err := d.Ctr("containers", "delete", ids["loner"]); err != nil {
		t.Fatalf("ctr containers delete: %v: %s", err, out)
	}
	testwait.For(t, within, func() bool {
		_, inst := stateFull(cl, name, "keeper")
		id := ctdContainerOf(d, inst)
		return id != "" && id != ids["keeper"] && stateOf(cl, name, "keeper") == "Running(Ok)"
	}, "keeper running again in a new container")
	want := "drift: removed behind the agent's back; repair: none (restartPolicy NEVER)"
	testwait.For(t, within, func() bool {
		s, _ := stateFull(cl, name, "loner")
		return s.Is(state.StateFailed, state.SubLost) && s.AdditionalInfo == want
	}, "loner Failed(Lost) with the drift reason %q (got %v)", want, testwait.Lazy(func() string { s, _ := stateFull(cl, name, "loner"); return fmt.Sprint(s) }))

	stray := state.NewInstanceName("stray", name, "cfg")
	if out, err := d.Ctr("run", "-d", "--label", "name="+stray.String(), "--label", "agent="+name, containerdtest.Image, "stray-"+name, "sleep", "600"); err != nil {
		t.Fatalf("ctr run: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := resyncAgent(ctx, cl, name); err != nil {
		t.Fatalf("resync: %v", err)
	}
	testwait.For(t, within, func() bool { return ctdContainerOf(d, stray) == "" }, "the unknown container removed")
	if s := stateOf(cl, name, "keeper"); s != "Running(Ok)" {
		t.Fatalf("keeper is %s after the resync", s)
	}
}
