package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// testAgentEnv turns the test binary into a stand-in agent that starts
// one workload and waits to be killed (see TestWorkloadSurvivesAgentKill);
// testAgentShimEnv, when set, is its Config.Shim.
const (
	testAgentEnv     = "GRAPNEL_PROCESS_TEST_AGENT"
	testAgentShimEnv = "GRAPNEL_PROCESS_TEST_AGENT_SHIM"
)

func TestMain(m *testing.M) {
	RunShimIfRequested()
	if dir := os.Getenv(testAgentEnv); dir != "" {
		os.Exit(runTestAgent(dir))
	}
	// A shim built with -race sleeps a second in exit (the race
	// detector's atexit_sleep_ms) after it recorded the exit; the shims
	// these tests start must end as promptly as a real agent's do, since
	// their end is what the watches wait for.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// runTestAgent creates a `sleep` workload, prints its ID and pid and
// blocks until killed. It logs to stderr.
func runTestAgent(runFolder string) int {
	shim := os.Getenv(testAgentShimEnv)
	os.Unsetenv(testAgentEnv)
	os.Unsetenv(testAgentShimEnv)
	rt, err := New(Config{RunFolder: runFolder, Shim: shim, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := makeSpec(runFolder, "survivor", "agentA", "command: sleep\nargs: ['60']")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	id, err := rt.Create(context.Background(), s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pid, err := rt.PID(id)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %d\n", id, pid)
	select {}
}

// makeSpec builds the Spec the agent would pass, and the RunDir it makes.
func makeSpec(runFolder, workload, agent, config string) (runtime.Spec, error) {
	inst := state.NewInstanceName(workload, agent, config)
	dir := filepath.Join(runFolder, agent+"_io", inst.String())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return runtime.Spec{}, err
	}
	return runtime.Spec{
		Instance: inst,
		Workload: &state.Workload{Agent: agent, Runtime: "process", RuntimeConfig: config},
		RunDir:   dir,
	}, nil
}

// harness is one runtime on a fresh run folder.
type harness struct {
	t         *testing.T
	runFolder string
	rt        *Runtime
}

// with is the harness for a subtest: its failures, and the cleanups of
// what it creates, are t's. A parallel subtest that failed through its
// parent's t would be reported without its name.
func (h *harness) with(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.RunFolder == "" {
		cfg.RunFolder = t.TempDir()
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 2 * time.Second
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, runFolder: cfg.RunFolder, rt: rt}
}

func (h *harness) spec(workload, config string) runtime.Spec {
	h.t.Helper()
	s, err := makeSpec(h.runFolder, workload, "agentA", config)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// create starts a workload and deletes it when the test ends.
func (h *harness) create(s runtime.Spec) runtime.ID {
	h.t.Helper()
	id, err := h.rt.Create(context.Background(), s)
	if err != nil {
		h.t.Fatalf("Create: %v", err)
	}
	h.t.Cleanup(func() {
		if err := h.rt.Delete(context.Background(), id); err != nil {
			h.t.Errorf("cleanup Delete: %v", err)
		}
	})
	return id
}

func (h *harness) state(id runtime.ID) state.ExecutionState {
	h.t.Helper()
	st, err := h.rt.State(context.Background(), id)
	if err != nil {
		h.t.Fatalf("State: %v", err)
	}
	return st
}

// waitState polls State until it is want, failing after a generous bound.
func (h *harness) waitState(id runtime.ID, want state.ExecutionState) {
	h.t.Helper()
	var last state.ExecutionState
	testwait.For(h.t, 10*time.Second, func() bool { last = h.state(id); return last == want },
		"state %v (it is %v)", want, testwait.Lazy(func() string { return fmt.Sprint(last) }))
}

// logs reads the whole log without following.
func (h *harness) logs(id runtime.ID, o runtime.LogOptions) string {
	h.t.Helper()
	rc, err := h.rt.Logs(context.Background(), id, o)
	if err != nil {
		h.t.Fatalf("Logs: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		h.t.Fatalf("reading logs: %v", err)
	}
	return string(b)
}

// waitLog waits until the log holds the text.
func (h *harness) waitLog(id runtime.ID, line string) {
	h.t.Helper()
	testwait.For(h.t, 10*time.Second, func() bool { return strings.Contains(h.logs(id, runtime.LogOptions{Tail: -1}), line) },
		"%q in the log", line)
}

func (h *harness) records(id runtime.ID) records {
	h.t.Helper()
	dir, err := h.rt.recordDir(id)
	if err != nil {
		h.t.Fatal(err)
	}
	rs, err := readRecords(dir, h.rt.boot)
	if err != nil {
		h.t.Fatal(err)
	}
	return rs
}

// processGone reports whether pid no longer runs (gone or a zombie).
func processGone(pid int) bool {
	st, err := readStat(pid)
	return err != nil || st.State == 'Z' || st.State == 'X'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	testwait.For(t, 10*time.Second, func() bool { return processGone(pid) }, "process %d to end", pid)
}

func isNotFound(err error) bool { return errors.Is(err, runtime.ErrNotFound) }

func mustKill(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}
