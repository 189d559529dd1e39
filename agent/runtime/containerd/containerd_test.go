package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd/containerdtest"
	"github.com/grapnel-io/grapnel/agent/runtime/linelog"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// These tests run real containers in a containerd of their own
// (containerdtest), started once for the package. They need root,
// containerd and the offline image of scripts/containerd-setup.sh.

const testImage = containerdtest.Image

// waitFor bounds every wait on a container; generous for a loaded host.
const waitFor = 30 * time.Second

var (
	daemon    *containerdtest.Daemon
	daemonWhy string // why there is no daemon
)

func TestMain(m *testing.M) {
	RunLoggerIfRequested()
	if daemonWhy = containerdtest.Missing(); daemonWhy == "" {
		d, err := containerdtest.Start()
		if err != nil {
			daemonWhy = "cannot start containerd: " + err.Error()
		} else {
			daemon = d
		}
	}
	code := m.Run()
	if daemon != nil {
		daemon.Stop()
	}
	os.Exit(code)
}

// ctdRuntime returns a runtime on the test daemon with a short grace
// period, or skips; with GRAPNEL_REQUIRE_CONTAINERD=1 (as .ci/run sets)
// it fails instead.
func ctdRuntime(t *testing.T) *Runtime {
	t.Helper()
	if daemon == nil {
		if os.Getenv(containerdtest.RequireEnv) == "1" {
			t.Fatalf("containerd is not usable and %s=1: %s", containerdtest.RequireEnv, daemonWhy)
		}
		t.Skip("containerd not set up: " + daemonWhy)
	}
	r, err := New(testConfig(daemon, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testConfig is the runtime's configuration on a test daemon.
func testConfig(d *containerdtest.Daemon, grace time.Duration) Config {
	return Config{Address: d.Address, DataRoot: d.NerdctlRoot, CNINetconfPath: d.NetConf, StopGrace: grace}
}

// testAgent is an agent name of its own per test, so that List sees only
// the test's containers.
func testAgent(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "gtest_" + hex.EncodeToString(b)
}

func spec(t *testing.T, agent, workload, config string) runtime.Spec {
	t.Helper()
	return runtime.Spec{
		Instance: state.NewInstanceName(workload, agent, config),
		Workload: &state.Workload{Agent: agent, Runtime: Name, RuntimeConfig: config},
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
	t.Cleanup(func() { _ = r.Delete(context.Background(), id) })
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

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading logs: %v", err)
	}
	return string(b)
}

// waitLogs polls Logs until the whole output is want.
func waitLogs(t *testing.T, r *Runtime, id runtime.ID, want string) {
	t.Helper()
	var got string
	testwait.For(t, waitFor, func() bool {
		rc, err := r.Logs(context.Background(), id, runtime.LogOptions{Tail: -1})
		if err != nil {
			got = err.Error()
			return false
		}
		got = readAll(t, rc)
		return got == want
	}, "output of %s to be %q (got %q)", id, want, testwait.Lazy(func() string { return got }))
}

func TestCreateRunningThenDelete(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "sleeper", shConfig("exec sleep 1000"))
	id := create(t, r, s)
	waitState(t, r, id, state.RunningOk)

	ctx := context.Background()
	info, err := r.info(ctx, string(id))
	if err != nil {
		t.Fatal(err)
	}
	if info.Labels["name"] != s.Instance.String() || info.Labels["agent"] != agent {
		t.Errorf("labels %v, want name=%s agent=%s", info.Labels, s.Instance, agent)
	}
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

// A task that ignores SIGTERM is killed after the grace period.
func TestDeleteKillsAfterGrace(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	s := spec(t, testAgent(t), "stubborn", shConfig("trap '' TERM; while true; do sleep 1; done"))
	id := create(t, r, s)
	waitState(t, r, id, state.RunningOk)
	if err := r.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := r.State(context.Background(), id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("State after Delete: %v, want ErrNotFound", err)
	}
}

// The exit code survives the reaping of the task: it is read again, from
// the container's label, by every later State and by a restarted agent.
func TestExitStates(t *testing.T) {
	r := ctdRuntime(t)
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
			restarted, err := New(testConfig(daemon, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := restarted.State(context.Background(), id); err != nil || got != tt.want {
				t.Fatalf("State after a restart = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// A workload file is bind-mounted read-only at its mount point, the
// control interface read-write.
func TestMounts(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	host := filepath.Join(t.TempDir(), "msg.txt")
	if err := os.WriteFile(host, []byte("hello from the host\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	ci := t.TempDir()
	s := spec(t, testAgent(t), "mounts", shConfig("cat /etc/grapnel/msg.txt; (echo x > /etc/grapnel/msg.txt) 2>/dev/null || echo read-only; echo y > "+runtime.ContainerControlInterface+"/probe && echo ci-writable"))
	s.Mounts = []runtime.Mount{{HostPath: host, MountPoint: "/etc/grapnel/msg.txt"}}
	s.ControlInterface = ci
	id := create(t, r, s)
	waitState(t, r, id, state.SucceededOk)
	waitLogs(t, r, id, "hello from the host\nread-only\nci-writable\n")
	if b, err := os.ReadFile(filepath.Join(ci, "probe")); err != nil || string(b) != "y\n" {
		t.Fatalf("control interface probe = %q, %v", b, err)
	}
}

// commandOptions reach the container as nerdctl would apply them.
func TestCommandOptions(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := "image: " + testImage + "\ncommandOptions: [-e, GREETING=hi, --workdir=/tmp, -v, " + dir + ":/data, --read-only]\n" +
		"commandArgs: [sh, -c, 'echo $GREETING; pwd; echo w > /data/out; (touch /x) 2>/dev/null || echo rootfs-read-only']\n"
	id := create(t, r, spec(t, testAgent(t), "opts", cfg))
	waitState(t, r, id, state.SucceededOk)
	waitLogs(t, r, id, "hi\n/tmp\nrootfs-read-only\n")
	if b, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(b) != "w\n" {
		t.Fatalf("volume write = %q, %v", b, err)
	}
}

// A restarted agent finds its running container by its labels and adopts
// it: same id, still running; a container of the agent whose name label
// is not an instance name is skipped.
func TestAgentRestartListsContainer(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	s := spec(t, agent, "survivor", shConfig("exec sleep 1000"))
	id := create(t, r, s)
	if out, err := daemon.Ctr("run", "-d", "--label", "agent="+agent, "--label", "name=garbage", testImage, "garbage-"+agent, "sleep", "1000"); err != nil {
		t.Fatalf("ctr run: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = r.Delete(context.Background(), runtime.ID("garbage-"+agent)) })

	restarted, err := New(testConfig(daemon, time.Second))
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
}

// Create replaces a leftover container of the same instance.
func TestCreateReplacesLeftover(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	s := spec(t, testAgent(t), "again", shConfig("exec sleep 1000"))
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

// A failing `ctr run` reports ctr's words and leaves no container; an
// image containerd does not have and cannot pull says so.
func TestCreateFails(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	ctx := context.Background()
	s := spec(t, agent, "nocmd", "image: "+testImage+"\ncommandArgs: [/no/such/command]\n")
	if _, err := r.Create(ctx, s); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Create with a missing command = %v, want ctr's error", err)
	}
	if found, err := r.List(ctx, agent); err != nil || len(found) != 0 {
		t.Fatalf("List after a failed create = %+v, %v; want none", found, err)
	}
	s = spec(t, agent, "noimage", "image: localhost/grapnel-no-such-image:1\n")
	if _, err := r.Create(ctx, s); err == nil || !strings.Contains(err.Error(), "has no image localhost/grapnel-no-such-image:1") {
		t.Fatalf("Create with a missing image = %v", err)
	}
}

func TestLogs(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	ctx := context.Background()
	s := spec(t, testAgent(t), "talker", shConfig("for i in 1 2 3; do echo out$i; sleep 0.05; echo err$i >&2; sleep 0.05; done; printf partial"))
	id := create(t, r, s)
	// Follow ends when the task does, with every line in the order
	// written, stdout and stderr interleaved; a last line without a
	// newline gets one.
	rc, err := r.Logs(ctx, id, runtime.LogOptions{Follow: true, Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	const all = "out1\nerr1\nout2\nerr2\nout3\nerr3\npartial\n"
	if got := readAll(t, rc); got != all {
		t.Fatalf("followed output %q, want %q", got, all)
	}
	rc, err = r.Logs(ctx, id, runtime.LogOptions{Tail: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); got != "err3\npartial\n" {
		t.Fatalf("Tail 2 = %q", got)
	}

	// Since and Until select by the time each line was logged.
	s2 := spec(t, testAgent(t), "clock", shConfig("echo early; sleep 1; echo late"))
	id2 := create(t, r, s2)
	waitState(t, r, id2, state.SucceededOk)
	times := logTimes(t, id2)
	if len(times) != 2 || !times[1].After(times[0].Add(500*time.Millisecond)) {
		t.Fatalf("log times %v, want two a second apart", times)
	}
	mid := times[0].Add(times[1].Sub(times[0]) / 2)
	for _, c := range []struct {
		o    runtime.LogOptions
		want string
	}{
		{runtime.LogOptions{Tail: -1, Since: mid}, "late\n"},
		{runtime.LogOptions{Tail: -1, Until: mid}, "early\n"},
		{runtime.LogOptions{Tail: -1, Since: times[1].Add(time.Second)}, ""},
	} {
		rc, err := r.Logs(ctx, id2, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, rc); got != c.want {
			t.Errorf("Logs(%+v) = %q, want %q", c.o, got, c.want)
		}
	}
}

// logTimes reads the times the logger gave the lines of a container.
func logTimes(t *testing.T, id runtime.ID) []time.Time {
	t.Helper()
	r := ctdRuntime(t)
	info, err := r.info(context.Background(), string(id))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(info.Labels[labelLog])
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		at, _, ok := linelog.ParseLine([]byte(line))
		if !ok {
			t.Fatalf("log line %q not in the logger's format", line)
		}
		out = append(out, at)
	}
	return out
}

func TestUnknownID(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	ctx := context.Background()
	for _, id := range []runtime.ID{"0123456789abcdef", "--all"} {
		if _, err := r.State(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("State(%q) = %v, want ErrNotFound", id, err)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Errorf("Delete(%q) = %v, want nil", id, err)
		}
	}
}

// A container that ended successfully is started again in place: it
// keeps its writable layer and its log.
func TestStartAgainKeepsTheContainer(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	s := spec(t, testAgent(t), "init", shConfig("if [ -f /marker ]; then echo again; else touch /marker; echo first; fi"))
	id := create(t, r, s)
	waitState(t, r, id, state.SucceededOk)
	got, err := r.StartAgain(context.Background(), id, s)
	if err != nil || got != id {
		t.Fatalf("StartAgain = %q, %v; want %q", got, err, id)
	}
	waitLogs(t, r, id, "first\nagain\n")
	waitState(t, r, id, state.SucceededOk)
}

// StartAgain refuses a container of another instance and leaves it alone.
func TestStartAgainRefusesAnotherInstance(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	other := spec(t, agent, "other", shConfig("exit 0"))
	otherID := create(t, r, other)
	waitState(t, r, otherID, state.SucceededOk)
	if _, err := r.StartAgain(context.Background(), otherID, spec(t, agent, "mine", shConfig("exit 0"))); err == nil {
		t.Fatal("StartAgain took the container of another instance")
	}
	waitState(t, r, otherID, state.SucceededOk)
}

// Drift: a task killed and deleted behind the agent's back leaves a
// container with no task and no exit: Failed(Lost). A container removed
// behind its back is ErrNotFound.
func TestDrift(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	agent := testAgent(t)
	a := create(t, r, spec(t, agent, "a", shConfig("exec sleep 1000")))
	b := create(t, r, spec(t, agent, "b", shConfig("exec sleep 1000")))
	waitState(t, r, a, state.RunningOk)
	waitState(t, r, b, state.RunningOk)
	if out, err := daemon.Ctr("tasks", "delete", "-f", string(a)); err != nil {
		t.Fatalf("ctr tasks delete: %v: %s", err, out)
	}
	testwait.For(t, waitFor, func() bool {
		st, err := r.State(context.Background(), a)
		return err == nil && st.State == state.StateFailed && st.SubState == state.SubLost
	}, "a task deleted behind the agent's back to be Failed(Lost)")
	if out, err := daemon.Ctr("tasks", "delete", "-f", string(b)); err != nil {
		t.Fatalf("ctr tasks delete: %v: %s", err, out)
	}
	if out, err := daemon.Ctr("containers", "delete", string(b)); err != nil {
		t.Fatalf("ctr containers delete: %v: %s", err, out)
	}
	testwait.For(t, waitFor, func() bool {
		_, err := r.State(context.Background(), b)
		return errors.Is(err, runtime.ErrNotFound)
	}, "a container removed behind the agent's back to be ErrNotFound")
}

// --cap-drop ALL with one capability added back leaves the container
// that one only (CAP_NET_BIND_SERVICE is bit 10).
func TestCapDropAllRuns(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	cfg := "image: " + testImage + "\ncommandOptions: [--cap-drop=ALL, --cap-add, NET_BIND_SERVICE]\n" +
		"commandArgs: [sh, -c, 'grep ^CapEff /proc/self/status']\n"
	id := create(t, r, spec(t, testAgent(t), "caps", cfg))
	waitState(t, r, id, state.SucceededOk)
	waitLogs(t, r, id, "CapEff:\t0000000000000400\n")
}

// The network a container gets: nerdctl's default network (here the test
// daemon's own bridge, containerdtest) gives it an address on the
// bridge's subnet in a network namespace of its own; --net host shares
// the host's; --net none has only the loopback interface.
func TestNetworks(t *testing.T) {
	r := ctdRuntime(t)
	t.Parallel()
	hostNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	const script = "readlink /proc/self/ns/net; ip -4 -o addr | awk '$2 != \"lo\" {print $2, $4}'"
	agent := testAgent(t)
	for _, c := range []struct {
		name, opts string
		check      func(ns string, addrs []string) string
	}{
		{"default", "[]", func(ns string, addrs []string) string {
			if ns == hostNS || len(addrs) != 1 || !strings.HasPrefix(addrs[0], "eth0 10.213.") {
				return "want a namespace of its own with eth0 on the test bridge's subnet 10.213.x.0/24"
			}
			return ""
		}},
		{"host", "[--net, host]", func(ns string, addrs []string) string {
			if ns != hostNS {
				return "want the host's network namespace " + hostNS
			}
			return ""
		}},
		{"none", "[--network=none]", func(ns string, addrs []string) string {
			if ns == hostNS || len(addrs) != 0 {
				return "want a namespace of its own with the loopback interface only"
			}
			return ""
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, _ := json.Marshal(script)
			cfg := "image: " + testImage + "\ncommandOptions: " + c.opts + "\ncommandArgs: [sh, -c, " + string(b) + "]\n"
			id := create(t, r, spec(t, agent, c.name, cfg))
			waitState(t, r, id, state.SucceededOk)
			var out string
			testwait.For(t, waitFor, func() bool {
				rc, err := r.Logs(context.Background(), id, runtime.LogOptions{Tail: -1, Follow: true})
				if err != nil {
					return false
				}
				out = readAll(t, rc)
				return out != ""
			}, "output of %s", id)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if why := c.check(lines[0], lines[1:]); why != "" {
				t.Fatalf("--net %s: namespace %s, addresses %q: %s", c.name, lines[0], lines[1:], why)
			}
		})
	}
}
