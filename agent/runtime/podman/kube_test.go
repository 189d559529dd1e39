package podman

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// These tests play real pods; they need what podmanRuntime needs, and
// the pause image podman builds offline from catatonit (Debian's
// podman depends on it).

// kubeTest is one test's agent and pod name; its pods and volumes are
// removed when the test ends.
func kubeTest(t *testing.T) (k *KubeRuntime, agent, pod string) {
	t.Helper()
	r := podmanRuntime(t)
	agent = testAgent(t)
	pod = "kp-" + strings.TrimPrefix(agent, "gtest_")
	t.Cleanup(func() {
		_ = exec.Command("podman", "pod", "rm", "--force", "--ignore", pod).Run()
		out, _ := exec.Command("podman", "volume", "ls", "--quiet").Output()
		for _, v := range strings.Fields(string(out)) {
			if strings.Contains(v, "."+agent+".") {
				_ = exec.Command("podman", "volume", "rm", "--force", v).Run()
			}
		}
	})
	return NewKube(r), agent, pod
}

// kubeSpec is a podman-kube instance whose pod runs script in one
// container named app.
func kubeSpec(t *testing.T, agent, pod, script, extra string) runtime.Spec {
	t.Helper()
	js, _ := json.Marshal(script)
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: %s\n    command: [sh, -c, %s]\n", pod, testImage, js)
	config := extra + "manifest: |\n" + indent(manifest)
	return runtime.Spec{
		Instance: state.NewInstanceName("kube", agent, config),
		Workload: &state.Workload{Agent: agent, Runtime: KubeName, RuntimeConfig: config},
		RunDir:   t.TempDir(),
	}
}

func waitKubeState(t *testing.T, k *KubeRuntime, id runtime.ID, want state.ExecutionState) {
	t.Helper()
	var got state.ExecutionState
	var err error
	testwait.For(t, waitFor, func() bool {
		got, err = k.State(context.Background(), id)
		return err == nil && got == want
	}, "state of %s to be %v (got %v, err %v)", id, want, testwait.Lazy(func() string { return fmt.Sprint(got) }), testwait.Lazy(func() string { return fmt.Sprint(err) }))
}

// volumeLabels returns a volume's labels, nil when it does not exist.
func volumeLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	out, err := exec.Command("podman", "volume", "inspect", "--format", "{{json .Labels}}", name).Output()
	if err != nil {
		return nil
	}
	var l map[string]string
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("labels of %s: %v", name, err)
	}
	if l == nil {
		l = map[string]string{}
	}
	return l
}

func podExists(name string) bool {
	return exec.Command("podman", "pod", "exists", name).Run() == nil
}

// A podman-kube workload plays, runs, is found again by a restarted
// agent's runtime, logs, and is taken down with its volumes.
//
// swdd~podman-kube-create-workload-apply-manifest~1
// swdd~podman-kube-create-workload-creates-config-volume~1
// swdd~podman-kube-create-workload-creates-pods-volume~1
// swdd~podman-kube-list-existing-workloads-using-config-volumes~1
// swdd~podman-kube-delete-workload-downs-manifest-file~1
// swdd~podman-kube-delete-removes-volumes~1
func TestKubeCreateRunningRestartDelete(t *testing.T) {
	k, agent, pod := kubeTest(t)
	t.Parallel()
	ctx := context.Background()
	s := kubeSpec(t, agent, pod, "echo hello from the pod; exec sleep 1000", "playOptions: [--log-driver, k8s-file]\n")
	id, err := k.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if id != runtime.ID(s.Instance.String()) {
		t.Fatalf("id %q, want the instance name", id)
	}
	waitKubeState(t, k, id, state.RunningOk)
	if !podExists(pod) {
		t.Fatalf("pod %s does not exist", pod)
	}

	inst := s.Instance.String()
	for _, v := range []string{inst + ".config", inst + ".pods"} {
		l := volumeLabels(t, v)
		if l == nil || l["agent"] != agent || l["name"] != inst || l["data"] == "" {
			t.Fatalf("volume %s labels %v, want agent, name and data", v, l)
		}
	}
	data, _ := base64.RawStdEncoding.DecodeString(volumeLabels(t, inst+".config")["data"])
	if !strings.Contains(string(data), "name: "+pod) || strings.Contains(string(data), "hello from the pod") {
		t.Fatalf("config volume holds %q: want the pod's name and nothing of its spec", data)
	}

	// An agent restart: a new runtime knows nothing but the host.
	r2, err := New(Config{StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k2 := NewKube(r2)
	found, err := k2.List(ctx, agent)
	if err != nil || len(found) != 1 || found[0].Instance != s.Instance || found[0].ID != id {
		t.Fatalf("List after restart = %+v, %v; want %s", found, err, s.Instance)
	}
	waitKubeState(t, k2, id, state.RunningOk)
	p1, _ := k.Pods(ctx, id)
	p2, err := k2.Pods(ctx, id)
	if err != nil || len(p2) != 1 || p2[0] != p1[0] {
		t.Fatalf("pods after restart %v (%v), before %v", p2, err, p1)
	}
	if other, err := k2.List(ctx, "gtest_nobody"); err != nil || len(other) != 0 {
		t.Fatalf("List of another agent = %+v, %v", other, err)
	}

	var logs string
	testwait.For(t, waitFor, func() bool {
		rc, err := k2.Logs(ctx, id, runtime.LogOptions{Tail: -1})
		if err != nil {
			return false
		}
		logs = readAll(t, rc)
		return strings.Contains(logs, "hello from the pod")
	}, "the pod's output in its logs (got %q)", testwait.Lazy(func() string { return logs }))

	if err := k2.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if podExists(pod) {
		t.Fatalf("pod %s still exists after Delete", pod)
	}
	for _, v := range []string{inst + ".config", inst + ".pods"} {
		if volumeLabels(t, v) != nil {
			t.Fatalf("volume %s still exists after Delete", v)
		}
	}
	if _, err := k2.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("State after Delete: %v, want ErrNotFound", err)
	}
	// The first runtime remembers the instance, and sees its pod gone.
	testwait.For(t, waitFor, func() bool {
		got, err := k.State(ctx, id)
		return err == nil && got.Is(state.StateFailed, state.SubLost)
	}, "the first runtime to see the pod gone (Failed(Lost))")
	if err := k2.Delete(ctx, id); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if found, err := k2.List(ctx, agent); err != nil || len(found) != 0 {
		t.Fatalf("List after Delete = %+v, %v", found, err)
	}
}

// swdd~podman-kube-state-getter-maps-state~2
func TestKubeExitStates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		want   state.ExecutionState
	}{
		{"exit 0", "exit 0", state.SucceededOk},
		{"exit 3", "exit 3", state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit code 3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, agent, pod := kubeTest(t)
			t.Parallel()
			id, err := k.Create(context.Background(), kubeSpec(t, agent, pod, tt.script, ""))
			if err != nil {
				t.Fatal(err)
			}
			waitKubeState(t, k, id, tt.want)
		})
	}
}

// A pod removed behind the runtime's back is lost; Create replaces a
// leftover of the same instance.
func TestKubeLostAndReplaced(t *testing.T) {
	k, agent, pod := kubeTest(t)
	t.Parallel()
	ctx := context.Background()
	s := kubeSpec(t, agent, pod, "exec sleep 1000", "")
	id, err := k.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	waitKubeState(t, k, id, state.RunningOk)
	if out, err := exec.Command("podman", "pod", "rm", "--force", "-t", "0", pod).CombinedOutput(); err != nil {
		t.Fatalf("podman pod rm: %v: %s", err, out)
	}
	// States come from a `podman ps` at most a second old.
	var got state.ExecutionState
	testwait.For(t, waitFor, func() bool {
		got, err = k.State(ctx, id)
		return err == nil && got.Is(state.StateFailed, state.SubLost)
	}, "Failed(Lost) after the pod was removed (got %v)", testwait.Lazy(func() string { return fmt.Sprint(got) }))
	// The same instance again, as after a power cycle: replaced.
	if _, err := k.Create(ctx, s); err != nil {
		t.Fatalf("Create over the leftover: %v", err)
	}
	waitKubeState(t, k, id, state.RunningOk)
	if _, err := k.Create(ctx, s); err != nil {
		t.Fatalf("Create over a running leftover: %v", err)
	}
	waitKubeState(t, k, id, state.RunningOk)
}

// The control interface directory is mounted into the target container.
//
// swdd~podman-kube-mounts-control-interface~2
func TestKubeControlInterfaceMounted(t *testing.T) {
	k, agent, pod := kubeTest(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker-input"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := kubeSpec(t, agent, pod, "ls /run/ankaios/control_interface; exec sleep 1000", "controlInterfaceTarget: "+pod+"/app\n")
	s.ControlInterface = dir
	id, err := k.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var logs string
	testwait.For(t, waitFor, func() bool {
		rc, err := k.Logs(ctx, id, runtime.LogOptions{Tail: -1})
		if err != nil {
			return false
		}
		logs = readAll(t, rc)
		return strings.Contains(logs, "marker-input")
	}, "the control interface directory listed in the pod (got %q)", testwait.Lazy(func() string { return logs }))

	// Without a target the workload cannot start, for good.
	bad := kubeSpec(t, agent, pod+"x", "true", "")
	bad.ControlInterface = dir
	if _, err := k.Create(ctx, bad); !errors.Is(err, runtime.ErrBadConfig) || !strings.Contains(err.Error(), "controlInterfaceTarget") {
		t.Fatalf("Create without controlInterfaceTarget: %v", err)
	}
	// Workload files are refused, as by Ankaios.
	files := kubeSpec(t, agent, pod+"y", "true", "")
	files.Mounts = []runtime.Mount{{HostPath: dir, MountPoint: "/etc/x"}}
	if _, err := k.Create(ctx, files); !errors.Is(err, runtime.ErrBadConfig) || !strings.Contains(err.Error(), "files") {
		t.Fatalf("Create with files: %v", err)
	}
}

// A play that fails because another workload's pod has the manifest's
// pod name leaves that pod alone, and leaves nothing of its own.
func TestKubeFailedPlayLeavesOthersAlone(t *testing.T) {
	k, agent, pod := kubeTest(t)
	t.Parallel()
	ctx := context.Background()
	a := kubeSpec(t, agent, pod, "exec sleep 1000", "")
	id, err := k.Create(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	waitKubeState(t, k, id, state.RunningOk)
	b := kubeSpec(t, agent, pod, "exec sleep 1001", "")
	if _, err := k.Create(ctx, b); err == nil || !strings.Contains(err.Error(), "kube play") {
		t.Fatalf("Create of a second pod of the same name: %v, want kube play's error", err)
	}
	if got, err := k.State(ctx, id); err != nil || got != state.RunningOk {
		t.Fatalf("the first workload after the second's failed play: %v, %v", got, err)
	}
	if volumeLabels(t, b.Instance.String()+".config") != nil {
		t.Fatal("the failed instance's config volume is left")
	}
	if found, _ := k.List(ctx, agent); len(found) != 1 || found[0].Instance != a.Instance {
		t.Fatalf("List = %+v, want only the first", found)
	}
}

// Only the first List asks podman; later ones answer from what Create and
// Delete kept, so a resync round costs no podman call. A new runtime (an
// agent restart) asks again and finds the instance.
func TestKubeListAsksPodmanOnce(t *testing.T) {
	k, agent, pod := kubeTest(t)
	calls := filepath.Join(t.TempDir(), "calls")
	wrapper := filepath.Join(t.TempDir(), "podman")
	// Only calls that succeeded are counted: a listing that met another
	// program's volume removal is asked again (listVolumes).
	script := fmt.Sprintf("#!/bin/sh\n%s \"$@\"\nrc=$?\n[ $rc = 0 ] && echo \"$*\" >> %s\nexit $rc\n", k.p.binary, calls)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Binary: wrapper, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k = NewKube(r)
	ctx := context.Background()
	list := func() []runtime.ID {
		t.Helper()
		found, err := k.List(ctx, agent)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var ids []runtime.ID
		for _, f := range found {
			ids = append(ids, f.ID)
		}
		return ids
	}
	volumeLists := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "volume ls")
	}
	if ids := list(); len(ids) != 0 {
		t.Fatalf("a fresh agent lists %v", ids)
	}
	s := kubeSpec(t, agent, pod, "exec sleep 1000", "")
	id, err := k.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if ids := list(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("after Create List says %v, want [%s]", ids, id)
	}
	restarted := NewKube(r)
	if found, err := restarted.List(ctx, agent); err != nil || len(found) != 1 || found[0].ID != id {
		t.Fatalf("a restarted agent lists %v, %v; want [%s]", found, err, id)
	}
	if err := k.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ids := list(); len(ids) != 0 {
		t.Fatalf("after Delete List says %v", ids)
	}
	if n := volumeLists(); n != 2 {
		t.Fatalf("%d `podman volume ls` calls, want 2 (one per runtime)", n)
	}
}

// Podman fails a whole `volume ls` when another program removes a volume
// while it lists (seen in CI beside the power-cycle tests); List asks
// again instead of failing the agent's resync.
func TestKubeListAsksAgainWhenAVolumeVanishes(t *testing.T) {
	k, agent, pod := kubeTest(t)
	dir := t.TempDir()
	failed := filepath.Join(dir, "failed")
	wrapper := filepath.Join(dir, "podman")
	script := fmt.Sprintf(`#!/bin/sh
if [ "$1 $2" = "volume ls" ] && [ ! -e %[1]s ]; then
	touch %[1]s
	echo "Error: no volume with name gone.config found in database: no such volume" >&2
	exit 125
fi
exec %[2]s "$@"
`, failed, k.p.binary)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Create(ctx, kubeSpec(t, agent, pod, "exec sleep 1000", ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	r, err := New(Config{Binary: wrapper, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	found, err := NewKube(r).List(ctx, agent)
	if err != nil || len(found) != 1 || found[0].ID != id {
		t.Fatalf("List = %v, %v; want [%s]", found, err, id)
	}
	if _, err := os.Stat(failed); err != nil {
		t.Fatalf("the first listing was never refused: %v", err)
	}
}
