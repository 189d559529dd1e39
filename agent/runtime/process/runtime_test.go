package process

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/state"
)

func failed(info string) state.ExecutionState {
	return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: info}
}

func TestCreateRunsInOwnSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("sleeper", "command: sleep\nargs: ['60']"))

	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state %v, want Running(Ok)", st)
	}
	pid, err := h.rt.PID(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("workload pid %d: %v", pid, err)
	}
	child, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	shim := h.records(id).shim
	if child.Session == self.Session {
		t.Fatalf("workload in the agent's session %d", self.Session)
	}
	if child.Session != shim.PID {
		t.Fatalf("workload session %d, want the shim's %d", child.Session, shim.PID)
	}
	if child.PGID != pid {
		t.Fatalf("workload process group %d, want its own %d", child.PGID, pid)
	}
	// Dispositions survive exec: the shim must not hand the workload
	// ignored signals.
	if ign := sigIgnored(t, pid); ign&(1<<(syscall.SIGHUP-1)|1<<(syscall.SIGPIPE-1)|1<<(syscall.SIGTERM-1)) != 0 {
		t.Fatalf("workload ignores signals, mask %#x", ign)
	}
	if id != runtime.ID(h.spec("sleeper", "command: sleep\nargs: ['60']").Instance.String()) {
		t.Fatalf("ID %q is not the instance name", id)
	}
}

// sigIgnored reads the SigIgn mask from /proc/<pid>/status.
func sigIgnored(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no SigIgn in status")
	return 0
}

func TestExitStates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script string
		want         state.ExecutionState
	}{
		{"exit 0", "exit 0", state.SucceededOk},
		{"exit 3", "exit 3", failed("exit code 3")},
		{"killed", "kill -9 $$", failed("killed by signal 9")},
	}
	h := newHarness(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			t.Parallel()
			id := h.create(h.spec(strings.ReplaceAll(tt.name, " ", "_"), "command: sh\nargs: ['-c', '"+tt.script+"']"))
			h.waitState(id, tt.want)
		})
	}
}

func TestEnvironmentReachesWorkload(t *testing.T) {
	// Not parallel: t.Setenv plants runtime variables in the agent's
	// environment to prove they do not leak into a workload.
	t.Setenv(runtime.FilesEnv, "/leaked/files")
	t.Setenv(runtime.ControlInterfaceEnv, "/leaked/ci")
	t.Setenv("GRAPNEL_TEST_INHERITED", "from-agent")
	t.Setenv("ANKAGENT_KEY_PEM", "/etc/agent/key.pem")
	t.Setenv("TZ", "Europe/Berlin")
	workDir := t.TempDir()
	script := `echo "foo=$FOO arg=$1 pwd=$(pwd) files=${GRAPNEL_FILES-unset} ci=${ANKAIOS_CONTROL_INTERFACE-unset} ` +
		`shim=${GRAPNEL_PROCESS_SHIM-unset} inherited=${GRAPNEL_TEST_INHERITED-unset} key=${ANKAGENT_KEY_PEM-unset} ` +
		`tz=$TZ path=$PATH home=$HOME"`
	config := "command: sh\nargs: ['-c', '" + script + "', 'sh', 'first']\nenv: {FOO: bar baz}\nworkingDir: " + workDir
	// A real directory: a workload with a control interface also gets
	// it bound at the SDKs' fixed path, which needs the directory.
	ci := filepath.Join(t.TempDir(), "control_interface")
	if err := os.Mkdir(ci, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		files, ci        string
		wantFiles, words string
	}{
		{"with files and control interface", "/run/x/files", ci, "", "files=/run/x/files ci=" + ci},
		{"without", "", "", "", "files=unset ci=unset"},
	}
	h := newHarness(t, Config{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			s := h.spec("env"+strconv.Itoa(i), config)
			s.FilesDir, s.ControlInterface = tt.files, tt.ci
			id := h.create(s)
			h.waitState(id, state.SucceededOk)
			home := filepath.Join(s.RunDir, workSubdir)
			// Requirement (issue 17, point 5): nothing of the agent's
			// environment but the locale and time zone.
			want := "foo=bar baz arg=first pwd=" + workDir + " " + tt.words + " shim=unset inherited=unset key=unset " +
				"tz=Europe/Berlin path=" + shim.DefaultPath + " home=" + home + "\n"
			if got := h.logs(id, runtime.LogOptions{Tail: -1}); got != want {
				t.Fatalf("workload saw\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestCreateFailures(t *testing.T) {
	t.Parallel()
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
		wantErr      error
		wantText     string
	}{
		{"command not in PATH", "command: no-such-command-grapnel", ErrStart, `command "no-such-command-grapnel" not found in PATH`},
		{"no such file", "command: /nonexistent/grapnel", ErrStart, `command "/nonexistent/grapnel": no such file`},
		{"not executable", "command: " + plain, ErrStart, "not executable"},
		{"missing workingDir", "command: sleep\nworkingDir: /nonexistent/dir", ErrStart, `runtimeConfig.workingDir "/nonexistent/dir": no such file`},
		{"workingDir a file", "command: sleep\nworkingDir: " + plain, ErrStart, "not a directory"},
		{"bad config", "command: sleep\nargs: [a, [b]]", runtime.ErrBadConfig, "runtimeConfig.args[1]: expected a string"},
	}
	h := newHarness(t, Config{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			s := h.spec("fail"+strconv.Itoa(i), tt.config)
			_, err := h.rt.Create(context.Background(), s)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("Create error %v, want %v containing %q", err, tt.wantErr, tt.wantText)
			}
			if _, err := os.Stat(filepath.Join(s.RunDir, recordSubdir)); !os.IsNotExist(err) {
				t.Fatalf("record left behind: %v", err)
			}
			if _, err := h.rt.State(context.Background(), runtime.ID(s.Instance.String())); !isNotFound(err) {
				t.Fatalf("State after a failed Create: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestCreateRejectsSpec(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	s := h.spec("wrongdir", "command: sleep")
	s.RunDir = t.TempDir()
	if _, err := h.rt.Create(context.Background(), s); err == nil || !strings.Contains(err.Error(), "Spec.RunDir") {
		t.Fatalf("Create with a foreign RunDir: %v", err)
	}
	s.Workload = nil
	if _, err := h.rt.Create(context.Background(), s); err == nil || !strings.Contains(err.Error(), "Spec.Workload") {
		t.Fatalf("Create without a workload: %v", err)
	}
}

func TestDeleteStopsAndRemoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("doomed", "command: sleep\nargs: ['60']"))
	pid, err := h.rt.PID(id)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := h.rt.recordDir(id)
	if err := h.rt.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if !processGone(pid) {
		t.Fatalf("process %d survived Delete", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("record %s survived Delete: %v", dir, err)
	}
	if _, err := h.rt.State(context.Background(), id); !isNotFound(err) {
		t.Fatalf("State after Delete: %v, want ErrNotFound", err)
	}
	if _, err := h.rt.PID(id); !isNotFound(err) {
		t.Fatalf("PID after Delete: %v, want ErrNotFound", err)
	}
	if err := h.rt.Delete(context.Background(), id); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := h.rt.Delete(context.Background(), "never.abc.agentA"); err != nil {
		t.Fatalf("Delete of an unknown instance: %v", err)
	}
}

func TestShimForwardsSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGTERM, "killed by signal 15"},
		{syscall.SIGINT, "exit code 130"},
	}
	h := newHarness(t, Config{})
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			// sh -c runs in the background, where SIGINT is ignored
			// unless trapped; the trap turns it into exit code 130.
			id := h.create(h.spec("signalled"+strconv.Itoa(int(tt.sig)), `command: sh
args: ['-c', 'trap "exit 130" INT; echo ready; while true; do sleep 0.05; done']`))
			h.waitLog(id, "ready\n")
			mustKill(t, h.records(id).shim.PID, tt.sig)
			h.waitState(id, failed(tt.want))
		})
	}
}

func TestDeleteKillsAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	h := newHarness(t, Config{StopGrace: grace})
	// The ignored SIGTERM is inherited by sleep, so only SIGKILL ends it.
	id := h.create(h.spec("stubborn", `command: sh
args: ['-c', 'trap "" TERM; echo ready; sleep 60; echo survived']`))
	h.waitLog(id, "ready\n")
	pid, _ := h.rt.PID(id)
	start := time.Now()
	if err := h.rt.Delete(context.Background(), id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if took := time.Since(start); took < grace {
		t.Fatalf("Delete took %v, less than the grace period", took)
	}
	if !processGone(pid) {
		t.Fatalf("process %d survived Delete", pid)
	}
}

func TestDeleteKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("parent", `command: sh
args: ['-c', 'sleep 60 & echo "bg $!"; wait']`))
	h.waitLog(id, "bg ")
	var bg int
	for _, line := range strings.Split(h.logs(id, runtime.LogOptions{Tail: -1}), "\n") {
		if n, ok := strings.CutPrefix(line, "bg "); ok {
			bg, _ = strconv.Atoi(n)
		}
	}
	if bg == 0 || processGone(bg) {
		t.Fatalf("background child %d not running", bg)
	}
	if err := h.rt.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitGone(t, bg)
}

func TestCreateReplacesLeftover(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	s := h.spec("again", "command: sleep\nargs: ['60']")
	id := h.create(s)
	old, _ := h.rt.PID(id)
	id2, err := h.rt.Create(context.Background(), s)
	if err != nil || id2 != id {
		t.Fatalf("second Create: %q, %v", id2, err)
	}
	now, _ := h.rt.PID(id)
	if now == old || !processGone(old) {
		t.Fatalf("old process %d not replaced (now %d)", old, now)
	}
	h.waitState(id, state.RunningOk)
}

// A restarted agent is a new Runtime on the same run folder: it lists
// the instance, sees the same process running and can delete it.
func TestSecondRuntimeAdopts(t *testing.T) {
	t.Parallel()
	first := newHarness(t, Config{})
	idA := first.create(first.spec("adoptme", "command: sleep\nargs: ['60']"))
	sB, err := makeSpec(first.runFolder, "other", "agentB", "command: sleep\nargs: ['60']")
	if err != nil {
		t.Fatal(err)
	}
	idB := first.create(sB)
	pid, _ := first.rt.PID(idA)

	second := newHarness(t, Config{RunFolder: first.runFolder})
	found, err := second.rt.List(context.Background(), "agentA")
	if err != nil {
		t.Fatal(err)
	}
	want := first.spec("adoptme", "command: sleep\nargs: ['60']").Instance
	if len(found) != 1 || found[0].Instance != want || found[0].ID != idA {
		t.Fatalf("List(agentA) = %+v, want %v", found, want)
	}
	if found, _ := second.rt.List(context.Background(), "agentB"); len(found) != 1 || found[0].ID != idB {
		t.Fatalf("List(agentB) = %+v", found)
	}
	if found, _ := second.rt.List(context.Background(), "agentC"); len(found) != 0 {
		t.Fatalf("List(agentC) = %+v", found)
	}
	if _, err := second.rt.List(context.Background(), "../x"); err == nil {
		t.Fatal("List accepted a path as agent name")
	}
	if st := second.state(idA); st != state.RunningOk {
		t.Fatalf("adopted state %v", st)
	}
	if got, _ := second.rt.PID(idA); got != pid {
		t.Fatalf("adopted pid %d, want %d", got, pid)
	}
	if err := second.rt.Delete(context.Background(), idA); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if found, _ := first.rt.List(context.Background(), "agentA"); len(found) != 0 {
		t.Fatalf("List after Delete = %+v", found)
	}
}

// A shim killed without recording the exit: the workload keeps running
// (it is adopted as Running) and, once it is gone too, is Failed(Lost).
func TestLostWhenShimAndProcessVanish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("orphan", "command: sleep\nargs: ['60']"))
	rs := h.records(id)
	mustKill(t, rs.shim.PID, syscall.SIGKILL)
	waitGone(t, rs.shim.PID)
	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state without shim %v, want Running(Ok)", st)
	}
	mustKill(t, rs.child.PID, syscall.SIGKILL)
	waitGone(t, rs.child.PID)
	h.waitState(id, state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
		AdditionalInfo: "process " + strconv.Itoa(rs.child.PID) + " is gone and its exit was not recorded"})
}

// The stand-in agent (runTestAgent) starts a workload and is killed with
// SIGKILL sent to its whole process group: the workload keeps its pid and
// a new Runtime adopts it.
func TestWorkloadSurvivesAgentKill(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runFolder := t.TempDir()
	agent := exec.Command(exe)
	agent.Env = append(os.Environ(), testAgentEnv+"="+runFolder)
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	agent.Stderr = t.Output()
	out, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		agent.Process.Kill()
		agent.Wait()
		t.Fatalf("stand-in agent: %v", err)
	}
	idText, pidText, _ := strings.Cut(strings.TrimSpace(line), " ")
	id := runtime.ID(idText)
	pid, _ := strconv.Atoi(pidText)
	h := newHarness(t, Config{RunFolder: runFolder})
	t.Cleanup(func() { h.rt.Delete(context.Background(), id) })

	mustKill(t, -agent.Process.Pid, syscall.SIGKILL)
	agent.Wait()
	if st, err := readStat(pid); err != nil || st.PGID == agent.Process.Pid || st.Session == agent.Process.Pid {
		t.Fatalf("workload %d after the agent's group was killed: %+v, %v", pid, st, err)
	}
	if shim := h.records(id).shim; !shim.alive(h.rt.boot) {
		t.Fatalf("shim %d died with the agent", shim.PID)
	}
	found, err := h.rt.List(context.Background(), "agentA")
	if err != nil || len(found) != 1 || found[0].ID != id {
		t.Fatalf("List after the agent died: %+v, %v", found, err)
	}
	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state %v, want Running(Ok)", st)
	}
	if got, _ := h.rt.PID(id); got != pid {
		t.Fatalf("pid %d, want %d", got, pid)
	}
	if err := h.rt.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestInvalidIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	for _, id := range []runtime.ID{"", "a.b", "../x.y.z", "a.b./etc", "a..c"} {
		if _, err := h.rt.State(context.Background(), id); !isNotFound(err) {
			t.Errorf("State(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := h.rt.PID(id); !isNotFound(err) {
			t.Errorf("PID(%q): %v, want ErrNotFound", id, err)
		}
	}
}

func TestNewConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "RunFolder") {
		t.Fatalf("New without run folder: %v", err)
	}
	if _, err := New(Config{RunFolder: t.TempDir(), Shim: "/nonexistent/shim"}); err == nil || !strings.Contains(err.Error(), "Config.Shim") {
		t.Fatalf("New with a missing shim: %v", err)
	}
	rt, err := New(Config{RunFolder: t.TempDir()})
	if err != nil || rt.Name() != "process" || rt.cfg.StopGrace != DefaultStopGrace {
		t.Fatalf("New: %v, %+v", err, rt)
	}
}

// List reads the records: a directory without a process record belongs
// to another runtime, a record without a spec (the agent died creating
// it) is named by its directory so it can be deleted, and a record whose
// spec names another instance is skipped.
func TestListRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ioDir := filepath.Join(h.runFolder, "agentA_io")
	mk := func(name string, sp *specRecord) {
		dir := filepath.Join(ioDir, name, recordSubdir)
		if sp == nil {
			dir = filepath.Dir(dir)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if sp != nil && sp.Instance != "" {
			if err := writeJSON(filepath.Join(dir, specFile), sp); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("podman.abc.agentA", nil)
	mk("half.abc.agentA", &specRecord{})
	mk("liar.abc.agentA", &specRecord{Instance: "other.abc.agentA"})
	mk("good.abc.agentA", &specRecord{Instance: "good.abc.agentA"})

	found, err := h.rt.List(context.Background(), "agentA")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		if string(f.ID) != f.Instance.String() {
			t.Fatalf("ID %q for instance %v", f.ID, f.Instance)
		}
		got = append(got, string(f.ID))
	}
	if strings.Join(got, " ") != "good.abc.agentA half.abc.agentA" {
		t.Fatalf("List = %v", got)
	}
	lost := state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
		AdditionalInfo: "the process runtime's shim ended before the process started"}
	if st := h.state("half.abc.agentA"); st != lost {
		t.Fatalf("state of a half record %v", st)
	}
	if err := h.rt.Delete(context.Background(), "half.abc.agentA"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ioDir, "half.abc.agentA", recordSubdir)); !os.IsNotExist(err) {
		t.Fatalf("half record not removed: %v", err)
	}
	if found, err := h.rt.List(context.Background(), "agentZ"); err != nil || len(found) != 0 {
		t.Fatalf("List of an agent without a folder: %v, %v", found, err)
	}
}
