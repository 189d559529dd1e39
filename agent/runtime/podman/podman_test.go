package podman

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// These tests run real containers. They need root, podman set up as
// scripts/podman-setup.sh does and its offline image.

const testImage = "localhost/grapnel-busybox:latest"

// waitFor bounds every wait on a container; generous for a loaded host.
const waitFor = 30 * time.Second

// podmanRuntime returns a runtime with a short grace period, or skips;
// with GRAPNEL_REQUIRE_PODMAN=1 (as .ci/run sets) it fails instead.
func podmanRuntime(t *testing.T) *Runtime {
	t.Helper()
	if !Available("") || exec.Command("podman", "image", "exists", testImage).Run() != nil {
		if os.Getenv("GRAPNEL_REQUIRE_PODMAN") == "1" {
			t.Fatal("podman or the test image is missing and GRAPNEL_REQUIRE_PODMAN=1: run scripts/podman-setup.sh")
		}
		t.Skip("podman not set up: run scripts/podman-setup.sh")
	}
	r, err := New(Config{StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testAgent is an agent name of its own per test, so that List sees only
// the test's containers; every container labelled with it is removed
// when the test ends.
func testAgent(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	agent := "gtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		out, _ := exec.Command("podman", "ps", "--all", "--quiet", "--filter", "label=agent="+agent).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("podman", append([]string{"rm", "--force", "--ignore", "-t", "0"}, ids...)...).Run()
		}
	})
	return agent
}

func spec(t *testing.T, agent, workload, config string) runtime.Spec {
	t.Helper()
	return runtime.Spec{
		Instance: state.NewInstanceName(workload, agent, config),
		Workload: &state.Workload{Agent: agent, Runtime: "podman", RuntimeConfig: config},
		RunDir:   t.TempDir(),
	}
}

// shConfig runs a shell script in the test image.
func shConfig(script string) string {
	b, _ := json.Marshal(script)
	return "image: " + testImage + "\ncommandArgs: [sh, -c, " + string(b) + "]\n"
}

func create(t *testing.T, r *Runtime, s runtime.Spec) runtime.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	id, err := r.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create %s: %v", s.Instance, err)
	}
	return id
}

// waitState polls State until it returns want.
func waitState(t *testing.T, r *Runtime, id runtime.ID, want state.ExecutionState) {
	t.Helper()
	var got state.ExecutionState
	var err error
	testwait.For(t, waitFor, func() bool {
		got, err = r.State(context.Background(), id)
		return err == nil && got == want
	}, "state of %s to be %v (got %v, err %v)", id, want, testwait.Lazy(func() string { return fmt.Sprint(got) }), testwait.Lazy(func() string { return fmt.Sprint(err) }))
}

func inspect(t *testing.T, id runtime.ID) (name string, labels map[string]string) {
	t.Helper()
	out, err := exec.Command("podman", "inspect", "--format", "{{.Name}} {{json .Config.Labels}}", string(id)).Output()
	if err != nil {
		t.Fatalf("podman inspect %s: %v", id, err)
	}
	name, js, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err := json.Unmarshal([]byte(js), &labels); err != nil {
		t.Fatalf("labels %q: %v", js, err)
	}
	return name, labels
}

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading logs: %v", err)
	}
	return string(b)
}

// swdd~podman-create-workload-runs-workload~1
// swdd~podman-create-workload-creates-labels~2
// swdd~podman-create-workload-returns-workload-id~1
// swdd~podman-delete-workload-stops-and-removes-workload~1
func TestCreateRunningThenDelete(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "sleeper", shConfig("exec sleep 1000"))
	id := create(t, r, s)
	waitState(t, r, id, state.RunningOk)

	name, labels := inspect(t, id)
	if name != s.Instance.String() {
		t.Errorf("container name %q, want %q", name, s.Instance)
	}
	if labels["name"] != s.Instance.String() || labels["agent"] != agent {
		t.Errorf("labels %v, want name=%s agent=%s", labels, s.Instance, agent)
	}
	ctx := context.Background()
	if got, err := r.ContainerID(ctx, s.Instance); err != nil || got != string(id) {
		t.Errorf("ContainerID = %q, %v; want %q", got, err, id)
	}

	if err := r.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := r.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
	if _, err := r.ContainerID(ctx, s.Instance); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("ContainerID after Delete: %v, want ErrNotFound", err)
	}
	if err := r.Delete(ctx, id); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if _, err := r.Logs(ctx, id, runtime.LogOptions{Tail: -1}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Logs after Delete: %v, want ErrNotFound", err)
	}
}

// swdd~podman-state-getter-maps-state~3
func TestExitStates(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	tests := []struct {
		name   string
		script string
		want   state.ExecutionState
	}{
		{"exit-0", "exit 0", state.SucceededOk},
		{"exit-3", "exit 3", state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit code 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := create(t, r, spec(t, agent, tt.name, shConfig(tt.script)))
			waitState(t, r, id, tt.want)
		})
	}
}

// A workload file is bind-mounted read-only at its mount point.
func TestFileMountReadOnly(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	host := filepath.Join(t.TempDir(), "files", "etc", "grapnel", "msg.txt")
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte("hello from the host\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	s := spec(t, agent, "reader", shConfig(
		"cat /etc/grapnel/msg.txt; if echo x >> /etc/grapnel/msg.txt; then echo WRITABLE; else echo READONLY; fi"))
	s.Mounts = []runtime.Mount{{HostPath: host, MountPoint: "/etc/grapnel/msg.txt"}}
	s.FilesDir = filepath.Dir(filepath.Dir(filepath.Dir(host)))
	id := create(t, r, s)
	waitState(t, r, id, state.SucceededOk)

	logs, err := r.Logs(context.Background(), id, runtime.LogOptions{Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	out := readAll(t, logs)
	if !strings.Contains(out, "hello from the host\n") || !strings.Contains(out, "READONLY\n") || strings.Contains(out, "WRITABLE") {
		t.Fatalf("container output %q: want the file's content and READONLY", out)
	}
	if b, _ := os.ReadFile(host); string(b) != "hello from the host\n" {
		t.Fatalf("host file changed to %q", b)
	}
}

// The control interface directory is mounted read-write at
// /run/ankaios/control_interface with its FIFOs.
// swdd~podman-create-workload-mounts-fifo-files~1
func TestControlInterfaceMounted(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	dir := filepath.Join(t.TempDir(), "control_interface")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"input", "output"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ci := runtime.ContainerControlInterface
	s := spec(t, agent, "ctl", shConfig("test -p "+ci+"/input && test -p "+ci+"/output && echo seen > "+ci+"/probe"))
	s.ControlInterface = dir
	id := create(t, r, s)
	waitState(t, r, id, state.SucceededOk)
	if b, err := os.ReadFile(filepath.Join(dir, "probe")); err != nil || string(b) != "seen\n" {
		t.Fatalf("probe written in the container: %q, %v", b, err)
	}
}

// A second Runtime value is the agent after a restart: it finds the
// running container by its labels, with the same id, and can manage it.
// swdd~podman-list-of-existing-workloads-uses-labels~1
func TestAgentRestartListsContainer(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "survivor", shConfig("exec sleep 1000"))
	id := create(t, r, s)
	// A container of the agent whose name label is not an instance name.
	if out, err := exec.Command("podman", "run", "--detach", "--label", "agent="+agent, "--label", "name=garbage",
		testImage, "sleep", "1000").CombinedOutput(); err != nil {
		t.Fatalf("podman run: %v: %s", err, out)
	}

	restarted, err := New(Config{StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	found, err := restarted.List(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Instance != s.Instance || found[0].ID != id {
		t.Fatalf("List = %+v, want one %s with id %s", found, s.Instance, id)
	}
	waitState(t, restarted, id, state.RunningOk)
	if other, err := restarted.List(ctx, "gtest_nobody"); err != nil || len(other) != 0 {
		t.Fatalf("List of another agent = %+v, %v; want none", other, err)
	}
	if err := restarted.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("State after the restarted runtime's Delete: %v, want ErrNotFound", err)
	}
}

// Create replaces a leftover container of the same instance.
func TestCreateReplacesLeftover(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "again", shConfig("exec sleep 1000"))
	first := create(t, r, s)
	second := create(t, r, s)
	if first == second {
		t.Fatalf("Create returned the leftover's id %s", first)
	}
	ctx := context.Background()
	if _, err := r.State(ctx, first); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("leftover still there: %v", err)
	}
	waitState(t, r, second, state.RunningOk)
	if got, err := r.ContainerID(ctx, s.Instance); err != nil || got != string(second) {
		t.Errorf("ContainerID = %q, %v; want %q", got, err, second)
	}
}

// A failing `podman run` reports podman's own words and leaves no
// container behind.
func TestCreateFails(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	tests := []struct {
		name    string
		config  string
		wantErr string
	}{
		{"missing image", "image: localhost/grapnel-no-such-image:latest\ncommandOptions: [--pull=never]", "image not known"},
		{"missing command", "image: " + testImage + "\ncommandArgs: [no-such-command]", "no-such-command"},
		{"bad option", "image: " + testImage + "\ncommandOptions: [--no-such-option]", "--no-such-option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := spec(t, agent, strings.ReplaceAll(tt.name, " ", "-"), tt.config)
			_, err := r.Create(context.Background(), s)
			if err == nil || !strings.Contains(err.Error(), "podman run: ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Create error %v, want podman run's error mentioning %q", err, tt.wantErr)
			}
			if errors.Is(err, runtime.ErrBadConfig) {
				t.Fatalf("podman's refusal %v wraps ErrBadConfig", err)
			}
			if id, err := r.ContainerID(context.Background(), s.Instance); !errors.Is(err, runtime.ErrNotFound) {
				t.Fatalf("container %q left behind (err %v)", id, err)
			}
		})
	}
	t.Run("bad config", func(t *testing.T) {
		_, err := r.Create(context.Background(), spec(t, agent, "bad", "image: img\nbogus: 1"))
		if !errors.Is(err, runtime.ErrBadConfig) {
			t.Fatalf("Create error %v, want ErrBadConfig", err)
		}
	})
}

// swdd~podman-log-fetching-collects-logs~1
func TestLogs(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	ctx := context.Background()
	begin := time.Now()

	// Follow from the start: the reader ends once the container has.
	id := create(t, r, spec(t, agent, "talker", shConfig("echo one; echo two >&2; sleep 2; echo three")))
	logs, err := r.Logs(ctx, id, runtime.LogOptions{Follow: true, Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	if out := readAll(t, logs); out != "one\ntwo\nthree\n" {
		t.Fatalf("followed logs %q, want one, two (stderr), three", out)
	}
	waitState(t, r, id, state.SucceededOk)

	tests := []struct {
		name string
		o    runtime.LogOptions
		want string
	}{
		{"all", runtime.LogOptions{Tail: -1}, "one\ntwo\nthree\n"},
		{"tail", runtime.LogOptions{Tail: 2}, "two\nthree\n"},
		{"tail zero", runtime.LogOptions{Tail: 0}, ""},
		{"until before start", runtime.LogOptions{Tail: -1, Until: begin.Add(-time.Minute)}, ""},
		{"since after end", runtime.LogOptions{Tail: -1, Since: time.Now().Add(time.Minute)}, ""},
		{"since before start", runtime.LogOptions{Tail: -1, Since: begin.Add(-time.Minute)}, "one\ntwo\nthree\n"},
		{"follow an ended container", runtime.LogOptions{Follow: true, Tail: 1}, "three\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs, err := r.Logs(ctx, id, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if out := readAll(t, logs); out != tt.want {
				t.Fatalf("logs %q, want %q", out, tt.want)
			}
		})
	}

	t.Run("close stops following", func(t *testing.T) {
		id := create(t, r, spec(t, agent, "endless", shConfig("echo start; exec sleep 1000")))
		logs, err := r.Logs(ctx, id, runtime.LogOptions{Follow: true, Tail: -1})
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(logs).ReadString('\n')
		if err != nil || line != "start\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		closed := make(chan struct{})
		go func() {
			logs.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(waitFor):
			t.Fatal("Close did not return")
		}
		if ps := logs.(*logReader).cmd.ProcessState; ps == nil {
			t.Fatal("podman logs not reaped after Close")
		}
		if _, err := logs.Read(make([]byte, 1)); err == nil {
			t.Fatal("Read after Close: no error")
		}
	})

	t.Run("context ends following", func(t *testing.T) {
		id := create(t, r, spec(t, agent, "endless2", shConfig("exec sleep 1000")))
		cctx, cancel := context.WithCancel(ctx)
		logs, err := r.Logs(cctx, id, runtime.LogOptions{Follow: true, Tail: -1})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		time.AfterFunc(200*time.Millisecond, cancel)
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, logs)
			logs.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatal("the reader did not end with its context")
		}
	})
}

func TestUnknownID(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	ctx := context.Background()
	for _, id := range []runtime.ID{"0000000000000000000000000000000000000000000000000000000000000000", "--all", ""} {
		if _, err := r.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("State(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := r.Logs(ctx, id, runtime.LogOptions{Tail: -1}); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("Logs(%q): %v, want ErrNotFound", id, err)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Errorf("Delete(%q): %v, want nil", id, err)
		}
	}
}

// StartAgain starts an ended container in place, as Ankaios does at the
// agent's start for a container that succeeded: same id, same writable
// layer (the marker file the first run left is still there).
// swdd~podman-create-workload-starts-existing-workload~1
func TestStartAgainKeepsTheContainer(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "init", shConfig("if [ -f /marker ]; then echo again; else touch /marker; echo first; fi"))
	id := create(t, r, s)
	waitState(t, r, id, state.SucceededOk)

	ctx := context.Background()
	got, err := r.StartAgain(ctx, id, s)
	if err != nil || got != id {
		t.Fatalf("StartAgain = %q, %v; want %q", got, err, id)
	}
	var out string
	testwait.For(t, waitFor, func() bool {
		logs, err := r.Logs(ctx, id, runtime.LogOptions{Tail: -1})
		if err != nil {
			t.Fatal(err)
		}
		out = readAll(t, logs)
		return out == "first\nagain\n"
	}, "the first run's output and the second's (have %q)", testwait.Lazy(func() string { return out }))
	waitState(t, r, id, state.SucceededOk)
	if cid, err := r.ContainerID(ctx, s.Instance); err != nil || cid != string(id) {
		t.Fatalf("ContainerID = %q, %v; want %q", cid, err, id)
	}
}

// StartAgain refuses a container of another instance and leaves it
// alone; a container that cannot start (its bind-mount source is gone, as
// on a run folder on tmpfs after a power cycle) is removed, so that
// Create can replace it.
func TestStartAgainFailures(t *testing.T) {
	r := podmanRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	ctx := context.Background()

	other := spec(t, agent, "other", shConfig("exit 0"))
	otherID := create(t, r, other)
	waitState(t, r, otherID, state.SucceededOk)
	mine := spec(t, agent, "mine", shConfig("exit 0"))
	if _, err := r.StartAgain(ctx, otherID, mine); err == nil {
		t.Fatal("StartAgain took the container of another instance")
	}
	waitState(t, r, otherID, state.SucceededOk)

	host := filepath.Join(t.TempDir(), "files", "msg.txt")
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte("x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	mine.Mounts = []runtime.Mount{{HostPath: host, MountPoint: "/msg.txt"}}
	id := create(t, r, mine)
	waitState(t, r, id, state.SucceededOk)
	if err := os.RemoveAll(filepath.Dir(host)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartAgain(ctx, id, mine); err == nil {
		t.Fatal("StartAgain succeeded without the bind-mount source")
	}
	if _, err := r.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("State of the container that did not start: %v, want ErrNotFound", err)
	}
}
