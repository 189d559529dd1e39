package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	ankbase "github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// kubeWorkload is a podman-kube workload whose pod sleeps.
func kubeWorkload(name, agent, pod string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  %s:
    runtime: podman-kube
    agent: %s
    restartPolicy: NEVER
    runtimeConfig: |
      downOptions: []
      manifest: |
        apiVersion: v1
        kind: Pod
        metadata:
          name: %s
        spec:
          restartPolicy: Never
          containers:
          - name: app
            image: %s
            command: [sleep, "600"]
`, name, agent, pod, podmanTestImage)
}

// podID is the id of the named pod, "" when there is none.
func podID(name string) string {
	out, err := exec.Command("podman", "pod", "inspect", "--format", "{{.ID}}", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// volumesOf lists the volumes named after one of agent's instances.
func volumesOf(agent string) []string {
	out, _ := exec.Command("podman", "volume", "ls", "--quiet").Output()
	var vs []string
	for _, v := range strings.Fields(string(out)) {
		if strings.Contains(v, "."+agent+".") {
			vs = append(vs, v)
		}
	}
	return vs
}

// deleteWorkload removes a workload from the desired state.
func deleteWorkload(t *testing.T, cl *testcluster.Cluster, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Addrs: cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{
			NewState:   rpc.CompleteStateToProto(&state.CompleteState{DesiredState: state.State{}}),
			UpdateMask: []string{"desiredState.workloads." + name},
		}}}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

// A podman-kube workload runs its pod; a restarted agent adopts the pod
// (same pod id); after a power loss (the pod left Exited while no agent
// ran) it is replaced by a running one; a delete takes the pod and the
// runtime's volumes away.
func TestPodmanKubeWorkload(t *testing.T) {
	requirePodman(t)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "kube_" + hex.EncodeToString(suffix[:])
	pod := "kpod-" + hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		_ = exec.Command("podman", "pod", "rm", "--force", "--ignore", pod).Run()
		for _, v := range volumesOf(name) {
			_ = exec.Command("podman", "volume", "rm", "--force", v).Run()
		}
	})
	cl := testcluster.New(t, 1)
	run := filepath.Join(workDir(t), "run")
	kubeOnly := func(c *Config) { c.Runtimes = []string{RuntimePodmanKube} }
	a := startAgent(t, cl, name, run, kubeOnly)
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected", name)
	apply(t, cl, kubeWorkload("web", name, pod))
	const within = 60 * time.Second // podman on a shared machine
	testwait.For(t, within, func() bool { return stateOf(cl, name, "web") == "Running(Ok)" }, "web Running(Ok)")
	first := podID(pod)
	if first == "" {
		t.Fatalf("no pod %s", pod)
	}
	if vs := volumesOf(name); len(vs) != 2 {
		t.Fatalf("volumes of the instance: %v, want its .config and .pods", vs)
	}

	// An agent restart adopts the running pod.
	a.stop(t)
	a = startAgent(t, cl, name, run, kubeOnly)
	testwait.For(t, connectWithin, func() bool { return connected(cl, name) }, "%s connected again", name)
	testwait.For(t, within, func() bool { return stateOf(cl, name, "web") == "Running(Ok)" }, "web Running(Ok) after the restart")
	if !strings.Contains(a.logs.String(), "found workload on the host") {
		t.Fatal("the restarted agent did not find the workload on the host")
	}
	if got := podID(pod); got != first {
		t.Fatalf("pod %s after an agent restart, want the adopted %s", got, first)
	}

	// A power loss: the agent is gone and the pod's containers exited.
	a.stop(t)
	if out, err := exec.Command("podman", "pod", "stop", "-t", "0", pod).CombinedOutput(); err != nil {
		t.Fatalf("podman pod stop: %v: %s", err, out)
	}
	startAgent(t, cl, name, run, kubeOnly)
	testwait.For(t, within, func() bool {
		id := podID(pod)
		return id != "" && id != first && stateOf(cl, name, "web") == "Running(Ok)"
	}, "web replaced by a running pod after the power loss")

	deleteWorkload(t, cl, "web")
	testwait.For(t, within, func() bool { return podID(pod) == "" && len(volumesOf(name)) == 0 }, "the pod and its volumes gone")
	testwait.For(t, within, func() bool { return stateOf(cl, name, "web") == "" || stateOf(cl, name, "web") == "Removed" }, "web removed")
}
