package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// podmanTestImage is the image scripts/podman-setup.sh builds offline.
const podmanTestImage = "localhost/grapnel-busybox:latest"

// requirePodman skips the test when podman or the test image is missing,
// unless GRAPNEL_REQUIRE_PODMAN=1 makes that a failure.
func requirePodman(t *testing.T) {
	t.Helper()
	if podman.Available("") && exec.Command("podman", "image", "exists", podmanTestImage).Run() == nil {
		return
	}
	if os.Getenv("GRAPNEL_REQUIRE_PODMAN") == "1" {
		t.Fatal("podman or the test image is missing and GRAPNEL_REQUIRE_PODMAN=1: run scripts/podman-setup.sh")
	}
	t.Skip("podman not set up: run scripts/podman-setup.sh")
}

// podmanSleeper is a podman workload that sleeps.
func podmanSleeper(name, agent string, policy state.RestartPolicy) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  %s:
    runtime: podman
    agent: %s
    restartPolicy: %s
    runtimeConfig: |
      image: %s
      commandArgs: [sleep, "600"]
`, name, agent, policy, podmanTestImage)
}

// containerOf is the id of the container podman runs for inst, "" when
// none or podman cannot say.
func containerOf(inst state.InstanceName) string {
	out, err := exec.Command("podman", "ps", "--all", "--filter", "label=name="+inst.String(), "--format", "{{.ID}}").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Containers removed behind the agent's back with `podman rm -f` are
// repaired: ALWAYS runs the workload again in a new container, NEVER
// leaves it Failed(Lost) with the drift reason at the server. A
// container with the agent's labels that the server never asked for is
// removed by `grapnel agent resync`.
func TestDriftRepairedAfterPodmanRm(t *testing.T) {
	requirePodman(t)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "drift_" + hex.EncodeToString(suffix[:]) // other tests may use podman at the same time
	t.Cleanup(func() {
		out, _ := exec.Command("podman", "ps", "--all", "--quiet", "--filter", "label=agent="+name).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("podman", append([]string{"rm", "--force", "-t", "0"}, ids...)...).Run()
		}
	})
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	startAgent(t, cl, name, filepath.Join(dir, "run"), func(c *Config) { c.Runtimes = []string{RuntimePodman} })
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected", name)
	apply(t, cl, podmanSleeper("keeper", name, state.RestartAlways))
	apply(t, cl, podmanSleeper("loner", name, state.RestartNever))
	const within = 60 * time.Second // podman on a shared machine
	ids := map[string]string{}
	for _, w := range []string{"keeper", "loner"} {
		testwait.For(t, within, func() bool { return stateOf(cl, name, w) == "Running(Ok)" }, "%s Running(Ok)", w)
		_, inst := stateFull(cl, name, w)
		ids[w] = containerOf(inst)
		if ids[w] == "" {
			t.Fatalf("no container for %s", inst)
		}
	}

	for _, w := range []string{"keeper", "loner"} {
		if out, err := exec.Command("podman", "rm", "--force", "-t", "0", ids[w]).CombinedOutput(); err != nil {
			t.Fatalf("podman rm -f %s: %v: %s", ids[w], err, out)
		}
	}

	testwait.For(t, within, func() bool {
		_, inst := stateFull(cl, name, "keeper")
		id := containerOf(inst)
		return id != "" && id != ids["keeper"] && stateOf(cl, name, "keeper") == "Running(Ok)"
	}, "keeper running again in a new container")
	want := "drift: removed behind the agent's back; repair: none (restartPolicy NEVER)"
	testwait.For(t, within, func() bool {
		s, _ := stateFull(cl, name, "loner")
		return s.Is(state.StateFailed, state.SubLost) && s.AdditionalInfo == want
	}, "loner Failed(Lost) with the drift reason %q", want)

	// A container with the agent's labels nobody asked for.
	stray := state.NewInstanceName("stray", name, "cfg")
	if out, err := exec.Command("podman", "run", "--detach", "--name", stray.String(),
		"--label", "name="+stray.String(), "--label", "agent="+name, podmanTestImage, "sleep", "600").CombinedOutput(); err != nil {
		t.Fatalf("podman run: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := resyncAgent(ctx, cl, name); err != nil {
		t.Fatalf("resync: %v", err)
	}
	testwait.For(t, within, func() bool { return containerOf(stray) == "" }, "the unknown container removed")
	if s := stateOf(cl, name, "keeper"); s != "Running(Ok)" {
		t.Fatalf("keeper is %s after the resync", s)
	}
}
