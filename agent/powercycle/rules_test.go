package powercycle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// The process runtime's shim is this test binary.
func TestMain(m *testing.M) {
	process.RunShimIfRequested()
	containerd.RunLoggerIfRequested()
	code := m.Run()
	stopCtd()
	os.Exit(code)
}

// waitWithin bounds every wait: generous for -race on a loaded machine
// and for podman.
const waitWithin = 60 * time.Second

// testImage is the image scripts/podman-setup.sh builds offline.
const testImage = "localhost/grapnel-busybox:latest"

// recorder keeps the reports of one Manager in the order they came.
type recorder struct {
	mu  sync.Mutex
	all []state.WorkloadState
}

func (r *recorder) report(ws []state.WorkloadState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, ws...)
}

func (r *recorder) history(inst state.InstanceName) []state.ExecutionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []state.ExecutionState
	for _, w := range r.all {
		if w.Instance == inst {
			out = append(out, w.State)
		}
	}
	return out
}

// index is the position of the first report of inst matching ok, -1 if
// none.
func (r *recorder) index(inst state.InstanceName, ok func(state.ExecutionState) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.all {
		if w.Instance == inst && ok(w.State) {
			return i
		}
	}
	return -1
}

func (r *recorder) last(inst state.InstanceName) state.ExecutionState {
	h := r.history(inst)
	if len(h) == 0 {
		return state.ExecutionState{}
	}
	return h[len(h)-1]
}

// rig is one runtime as the tests drive it.
type rig struct {
	name string
	// runtime opens the runtime as an agent starting in boot.
	runtime func(t *testing.T, boot string) runtime.Runtime
	// config is the runtimeConfig of a shell script.
	config func(script string) string
	// hostID identifies the live instance on the host: a pid with its
	// start time, a container id; "" when there is none.
	hostID func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) string
	// powerLoss ends an instance as a power cut does: nothing records
	// its exit.
	powerLoss func(t *testing.T, rt runtime.Runtime, inst state.InstanceName)
	// inPlace: a succeeded instance is started again in place.
	inPlace bool
}

// processRig is the process runtime on a run folder that outlives the
// simulated reboots, with a boot id file of its own.
func processRig(t *testing.T, runFolder string) rig {
	bootFile := filepath.Join(t.TempDir(), "boot_id")
	return rig{
		name: "process",
		runtime: func(t *testing.T, boot string) runtime.Runtime {
			if err := os.WriteFile(bootFile, []byte(boot+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rt, err := process.New(process.Config{RunFolder: runFolder, BootIDFile: bootFile, StopGrace: 2 * time.Second, Logger: quiet(t)})
			if err != nil {
				t.Fatal(err)
			}
			return rt
		},
		config: func(script string) string {
			b, _ := json.Marshal(script)
			return "command: sh\nargs: ['-c', " + string(b) + "]\n"
		},
		hostID: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) string {
			pid, err := rt.(*process.Runtime).PID(runtime.ID(inst.String()))
			if err != nil {
				return ""
			}
			return fmt.Sprintf("pid %d started %s", pid, startTime(pid))
		},
		powerLoss: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) {
			pid, err := rt.(*process.Runtime).PID(runtime.ID(inst.String()))
			if err != nil {
				t.Fatal(err)
			}
			// The shim leads the workload's session; killed first, it
			// cannot record the workload's end.
			shim := session(pid)
			for _, p := range []int{shim, pid} {
				if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
					t.Fatalf("kill %d: %v", p, err)
				}
				testwait.For(t, waitWithin, func() bool { return gone(p) }, "%v", testwait.Lazy(func() string { return fmt.Sprintf("process %d to end", p) }))
			}
		},
	}
}

// podmanRig is the podman runtime, or nil when podman is not set up.
func podmanRig(t *testing.T) *rig {
	if !podman.Available("") || exec.Command("podman", "image", "exists", testImage).Run() != nil {
		if os.Getenv("GRAPNEL_REQUIRE_PODMAN") == "1" {
			t.Fatal("podman or the test image is missing and GRAPNEL_REQUIRE_PODMAN=1: run scripts/podman-setup.sh")
		}
		return nil
	}
	return &rig{
		name: "podman",
		runtime: func(t *testing.T, boot string) runtime.Runtime {
			rt, err := podman.New(podman.Config{StopGrace: time.Second, Logger: quiet(t)})
			if err != nil {
				t.Fatal(err)
			}
			return rt
		},
		config: func(script string) string {
			b, _ := json.Marshal(script)
			return "image: " + testImage + "\ncommandArgs: [sh, -c, " + string(b) + "]\n"
		},
		hostID: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) string {
			id, err := rt.(*podman.Runtime).ContainerID(context.Background(), inst)
			if err != nil {
				return ""
			}
			return "container " + id
		},
		// A power cut leaves a container that ran Exited: podman finds
		// it so at the next boot. SIGKILL gives it a non-zero exit code,
		// so it counts as failed and is replaced.
		powerLoss: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) {
			if out, err := exec.Command("podman", "kill", inst.String()).CombinedOutput(); err != nil {
				t.Fatalf("podman kill %s: %v: %s", inst, err, out)
			}
			if out, err := exec.Command("podman", "wait", inst.String()).CombinedOutput(); err != nil {
				t.Fatalf("podman wait %s: %v: %s", inst, err, out)
			}
		},
		inPlace: true,
	}
}

func quiet(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// statField reads field n of /proc/<pid>/stat, counted from 1 as proc(5)
// does; "" when the process is gone. The command name (field 2) may hold
// spaces, so fields are counted from its closing parenthesis.
func statField(pid, n int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[end+1:]) // f[0] is field 3
	if end < 0 || n < 3 || len(f) <= n-3 {
		return ""
	}
	return f[n-3]
}

func startTime(pid int) string { return statField(pid, 22) }

func session(pid int) int {
	n, _ := strconv.Atoi(statField(pid, 6))
	return n
}

// gone: no such process, or a zombie.
func gone(pid int) bool {
	st := statField(pid, 3)
	return st == "" || st == "Z" || st == "X"
}

// agentName is unique per test, so that podman's List sees only the
// test's containers; they, and podman-kube's volumes of the agent, are
// removed when the test ends.
func agentName(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "pc_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		out, _ := exec.Command("podman", "ps", "--all", "--quiet", "--filter", "label=agent="+name).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("podman", append([]string{"rm", "--force", "--ignore", "-t", "0"}, ids...)...).Run()
		}
		out, _ = exec.Command("podman", "volume", "ls", "--quiet", "--filter", "label=agent="+name).Output()
		if vs := strings.Fields(string(out)); len(vs) > 0 {
			_ = exec.Command("podman", append([]string{"volume", "rm", "--force"}, vs...)...).Run()
		}
	})
	return name
}

// kubeRig is the podman-kube runtime, or nil when podman is not set up.
// Every script gets a pod of its own, named after it.
func kubeRig(t *testing.T) *rig {
	p := podmanRig(t)
	if p == nil {
		return nil
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	tag := hex.EncodeToString(suffix[:])
	t.Cleanup(func() {
		// The pods outlive a test that fails half-way.
		out, _ := exec.Command("podman", "pod", "ps", "--quiet", "--filter", "name=^pc-"+tag+"-").Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("podman", append([]string{"pod", "rm", "--force", "--ignore", "-t", "0"}, ids...)...).Run()
		}
	})
	seq := 0
	pods := func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) []string {
		ids, err := rt.(*podman.KubeRuntime).Pods(context.Background(), runtime.ID(inst.String()))
		if err != nil {
			return nil
		}
		return ids
	}
	return &rig{
		name: podman.KubeName,
		runtime: func(t *testing.T, boot string) runtime.Runtime {
			return podman.NewKube(p.runtime(t, boot).(*podman.Runtime))
		},
		config: func(script string) string {
			// Two workloads may run the same script: each gets a pod.
			seq++
			sum := sha256.Sum256(fmt.Appendf(nil, "%d %s", seq, script))
			b, _ := json.Marshal(script)
			return fmt.Sprintf("manifest: |\n  apiVersion: v1\n  kind: Pod\n  metadata:\n    name: pc-%s-%x\n  spec:\n    restartPolicy: Never\n    containers:\n    - name: app\n      image: %s\n      command: [sh, -c, %s]\n",
				tag, sum[:4], testImage, b)
		},
		hostID: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) string {
			ids := pods(t, rt, inst)
			for _, id := range ids {
				if exec.Command("podman", "pod", "exists", id).Run() != nil {
					return ""
				}
			}
			if len(ids) == 0 {
				return ""
			}
			return "pods " + strings.Join(ids, ",")
		},
		// A power cut leaves the pod's containers Exited; killed, they
		// count as failed and the pod is replaced.
		powerLoss: func(t *testing.T, rt runtime.Runtime, inst state.InstanceName) {
			for _, id := range pods(t, rt, inst) {
				if out, err := exec.Command("podman", "pod", "kill", id).CombinedOutput(); err != nil {
					t.Fatalf("podman pod kill %s: %v: %s", id, err, out)
				}
				testwait.For(t, waitWithin, func() bool {
					out, _ := exec.Command("podman", "pod", "inspect", "--format", "{{.State}}", id).Output()
					return strings.TrimSpace(string(out)) == "Exited"
				}, "pod %s Exited", id)
			}
		},
	}
}

// agentRun is one agent process as the Manager sees it.
type agentRun struct {
	m   *workload.Manager
	rt  runtime.Runtime
	rec *recorder
}

func startManager(t *testing.T, r rig, agent, runFolder, boot string) *agentRun {
	a := &agentRun{rt: r.runtime(t, boot), rec: &recorder{}}
	a.m = workload.NewManager(workload.Config{
		Agent: agent, RunFolder: runFolder,
		Runtimes:     map[string]runtime.Runtime{r.name: a.rt},
		Report:       a.rec.report,
		Logger:       quiet(t),
		PollInterval: 50 * time.Millisecond,
	})
	return a
}

// TestStartRules runs one agent, ends it, and starts another on the same
// host: after a plain agent restart, after a simulated power cycle, and
// after one that also emptied the run folder (tmpfs). What the second
// agent does with each instance is upstream Ankaios's rule for it (see
// the package doc).
//
// swdd~agent-existing-workloads-resume-existing~2
// swdd~agent-existing-workloads-reuse-unmodified~1
// swdd~agent-existing-workloads-replace-updated~4
// swdd~agent-existing-workloads-starts-new-if-not-found~1
func TestStartRules(t *testing.T) {
	rigs := []func(t *testing.T, runFolder string) *rig{
		func(t *testing.T, runFolder string) *rig { r := processRig(t, runFolder); return &r },
		func(t *testing.T, _ string) *rig { return podmanRig(t) },
		func(t *testing.T, _ string) *rig { return kubeRig(t) },
		func(t *testing.T, _ string) *rig { return containerdRig(t) },
	}
	scenarios := []struct {
		name         string
		reboot, wipe bool
	}{
		{"agent_restart", false, false},
		{"power_cycle", true, false},
		{"power_cycle_tmpfs", true, true},
	}
	for i, mk := range rigs {
		for _, sc := range scenarios {
			t.Run([]string{"process", "podman", "podman-kube", "containerd"}[i]+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				runFolder := t.TempDir()
				r := mk(t, runFolder)
				if r == nil {
					t.Skip("podman or containerd not set up: run scripts/podman-setup.sh or scripts/containerd-setup.sh")
				}
				testStartRules(t, *r, runFolder, sc.reboot, sc.wipe)
			})
		}
	}
}

// expectation is what the second agent must do with one workload.
type expectation int

const (
	resumed      expectation = iota // same host id, no new start
	startedAgain                    // started anew, in place where the runtime can
	replaced                        // started anew under another host id
	created                         // not there before
)

func testStartRules(t *testing.T, r rig, runFolder string, reboot, wipe bool) {
	agent := agentName(t)
	counter := filepath.Join(t.TempDir(), "init-runs")
	added := func(name, script string, deps map[string]state.AddCondition) workload.Added {
		cfg := r.config(script)
		return workload.Added{
			Instance: state.NewInstanceName(name, agent, cfg),
			Workload: &state.Workload{Agent: agent, Runtime: r.name, RuntimeConfig: cfg,
				RestartPolicy: state.RestartNever, Dependencies: deps},
		}
	}
	// init needs its file: started again after the run folder was
	// emptied, it must find it written again.
	initScript := "cat /etc/init.conf && sleep 1"
	if r.name == "process" {
		initScript = "echo run >> " + counter + " && cat $GRAPNEL_FILES/etc/init.conf && sleep 1"
	}
	var (
		running = added("running", "exec sleep 300", nil)
		init_   = added("init", initScript, nil)
		job     = added("job", "exit 3", nil)
		oldSpec = added("changed", "exec sleep 300", nil)
		newSpec = added("changed", "exec sleep 301", nil)
		// Lost in the power cut (or, without one, killed while no
		// agent watched), and dependent on init's success.
		lost    = added("lost", "exec sleep 302", map[string]state.AddCondition{"init": state.AddCondSucceeded})
		unknown = added("unknown", "exec sleep 303", nil)
	)
	if r.name == podman.KubeName {
		// podman-kube takes no workload files (a ConfigMap does it).
		init_ = added("init", "sleep 1", nil)
	} else {
		init_.Workload.Files = []state.File{{MountPoint: "/etc/init.conf", Content: "ok\n"}}
	}
	succeeded := func(s state.ExecutionState) bool { return s.Is(state.StateSucceeded, state.SubOk) }
	isRunning := func(s state.ExecutionState) bool { return s == state.RunningOk }
	execFailed := func(s state.ExecutionState) bool { return s.Is(state.StateFailed, state.SubExecFailed) }
	triggered := func(s state.ExecutionState) bool { return s.Is(state.StatePending, state.SubStarting) }

	// The first agent.
	first := startManager(t, r, agent, runFolder, "boot-1")
	first.m.ServerHello(context.Background(), []workload.Added{running, init_, job, oldSpec, lost})
	for _, c := range []struct {
		a  workload.Added
		ok func(state.ExecutionState) bool
	}{{running, isRunning}, {init_, succeeded}, {job, execFailed}, {oldSpec, isRunning}, {lost, isRunning}} {
		testwait.For(t, waitWithin, func() bool { return first.rec.index(c.a.Instance, c.ok) >= 0 }, "%v", testwait.Lazy(func() string {
			return fmt.Sprintf("%s in the first run (history %v)", c.a.Instance.WorkloadName, first.rec.history(c.a.Instance))
		}))
	}
	before := map[string]string{}
	for _, a := range []workload.Added{running, init_, job, oldSpec, lost} {
		before[a.Instance.WorkloadName] = r.hostID(t, first.rt, a.Instance)
	}
	first.m.Close()

	// The cut: every workload ends without a record of it, and the boot
	// changes; without one, only `lost` dies while no agent watches.
	boot := "boot-1"
	r.powerLoss(t, first.rt, lost.Instance)
	if reboot {
		boot = "boot-2"
		for _, a := range []workload.Added{running, oldSpec} {
			r.powerLoss(t, first.rt, a.Instance)
		}
	}
	if wipe {
		entries, err := os.ReadDir(runFolder)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(runFolder, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}

	second := startManager(t, r, agent, runFolder, boot)
	t.Cleanup(func() {
		// The workloads outlive the Manager by design.
		second.m.Close()
		found, _ := second.rt.List(context.Background(), agent)
		for _, f := range found {
			_ = second.rt.Delete(context.Background(), f.ID)
		}
	})
	second.m.ServerHello(context.Background(), []workload.Added{running, init_, job, newSpec, lost, unknown})

	want := map[*workload.Added]expectation{&running: resumed, &init_: startedAgain, &job: replaced,
		&newSpec: created, &lost: replaced, &unknown: created}
	if reboot {
		want[&running] = replaced
	}
	if wipe && r.name == "process" {
		// Nothing of them is left to find: all are created.
		for _, a := range []*workload.Added{&running, &init_, &job, &lost} {
			want[a] = created
		}
	}
	final := map[*workload.Added]func(state.ExecutionState) bool{&running: isRunning, &init_: succeeded,
		&job: execFailed, &newSpec: isRunning, &lost: isRunning, &unknown: isRunning}
	for a, ok := range final {
		testwait.For(t, waitWithin, func() bool {
			// After a start the first report is Pending: wait for the
			// end state after it.
			return ok(second.rec.last(a.Instance)) && (want[a] == resumed || second.rec.index(a.Instance, triggered) >= 0)
		}, "%v", testwait.Lazy(func() string {
			return fmt.Sprintf("%s in the second run (history %v)", a.Instance.WorkloadName, second.rec.history(a.Instance))
		}))
	}

	for a, exp := range want {
		name := a.Instance.WorkloadName
		hist := second.rec.history(a.Instance)
		now := r.hostID(t, second.rt, a.Instance)
		switch exp {
		case resumed:
			if fmt.Sprint(hist) != fmt.Sprint([]state.ExecutionState{state.RunningOk}) {
				t.Errorf("%s: history %v, want it resumed: Running(Ok) only", name, hist)
			}
			if now != before[name] {
				t.Errorf("%s: was %s, now %q: restarted", name, before[name], now)
			}
		case startedAgain:
			if second.rec.index(a.Instance, triggered) < 0 {
				t.Errorf("%s: history %v, want it started again", name, hist)
			}
			if r.inPlace && now != before[name] {
				t.Errorf("%s: was %s, now %q: want it started again in place", name, before[name], now)
			}
		case replaced, created:
			if second.rec.index(a.Instance, triggered) < 0 {
				t.Errorf("%s: history %v, want it started anew", name, hist)
			}
			if now == "" || now == before[name] {
				t.Errorf("%s: was %q, now %q: want a new one", name, before[name], now)
			}
		}
	}
	// The old spec's instance is gone, silently: the server never hears
	// of it again.
	if id := r.hostID(t, second.rt, oldSpec.Instance); id != "" {
		t.Errorf("the changed workload's old instance is still there: %s", id)
	}
	if h := second.rec.history(oldSpec.Instance); len(h) != 0 {
		t.Errorf("reports for the old instance of the changed workload: %v", h)
	}
	// Add conditions hold for a replaced instance as for a new one:
	// `lost` starts only after init succeeded again.
	initAgain := second.rec.index(init_.Instance, succeeded)
	lostStarts := second.rec.index(lost.Instance, triggered)
	if initAgain < 0 || lostStarts < initAgain {
		t.Errorf("lost started at report %d, init succeeded again at %d: want after", lostStarts, initAgain)
	}
	if r.name == "process" {
		if b, _ := os.ReadFile(counter); strings.Count(string(b), "run") != 2 {
			t.Errorf("init ran %d times, want twice", strings.Count(string(b), "run"))
		}
	}
}

// A container a power cut left Created, never started, is replaced.
func TestPodmanCreatedContainerReplaced(t *testing.T) {
	r := podmanRig(t)
	if r == nil {
		t.Skip("podman not set up: run scripts/podman-setup.sh")
	}
	t.Parallel()
	agent := agentName(t)
	cfg := r.config("exec sleep 300")
	a := workload.Added{Instance: state.NewInstanceName("svc", agent, cfg),
		Workload: &state.Workload{Agent: agent, Runtime: "podman", RuntimeConfig: cfg, RestartPolicy: state.RestartNever}}
	out, err := exec.Command("podman", "create", "--name", a.Instance.String(), "--label", "name="+a.Instance.String(),
		"--label", "agent="+agent, testImage, "sleep", "300").Output()
	if err != nil {
		t.Fatalf("podman create: %v", err)
	}
	left := "container " + strings.TrimSpace(string(out))

	ag := startManager(t, *r, agent, t.TempDir(), "boot-2")
	t.Cleanup(ag.m.Close)
	ag.m.ServerHello(context.Background(), []workload.Added{a})
	testwait.For(t, waitWithin, func() bool { return ag.rec.last(a.Instance) == state.RunningOk }, "%v", testwait.Lazy(func() string { return fmt.Sprintf("svc running (history %v)", ag.rec.history(a.Instance)) }))
	if now := r.hostID(t, ag.rt, a.Instance); now == left || now == "" {
		t.Fatalf("container %q, want a new one in place of %s", now, left)
	}
}
