package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/pidfd"
	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// bound is how long a test waits for what should come at once; generous
// because the machine is shared and the tests run with -race.
const bound = 10 * time.Second

func skipWithoutPidfd(t *testing.T) {
	t.Helper()
	if !pidfd.Supported() {
		t.Skip("no pidfd on this kernel: states are polled")
	}
}

// gate is a FIFO a workload blocks on until the test opens it.
type gate string

func newGate(t *testing.T) gate {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return gate(path)
}

// script is a workload that waits for the gate, then runs then.
func (g gate) script(then string) string {
	return fmt.Sprintf("command: sh\nargs: ['-c', 'read x < %s; %s']", string(g), then)
}

// open lets the workload through.
func (g gate) open(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(string(g), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func (h *harness) watch(ctx context.Context, id runtime.ID) <-chan struct{} {
	h.t.Helper()
	ch, err := h.rt.Watch(ctx, id)
	if err != nil {
		h.t.Fatalf("Watch: %v", err)
	}
	if ch == nil {
		h.t.Fatal("Watch of a running instance gave no channel")
	}
	select {
	case <-ch:
		h.t.Fatal("the watch fired while the workload runs")
	default:
	}
	return ch
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(bound):
		t.Fatalf("the watch did not fire after %s", what)
		return 0
	}
}

func TestWatchFiresWhenTheStateChanges(t *testing.T) {
	skipWithoutPidfd(t)
	t.Parallel()
	h := newHarness(t, Config{})
	tests := []struct {
		name string
		then string
		end  func(t *testing.T, h *harness, id runtime.ID, g gate, armed <-chan struct{})
		want func(rs records) state.ExecutionState
	}{
		{"exit 0", "exit 0", nil, func(records) state.ExecutionState { return state.SucceededOk }},
		{"exit 3", "exit 3", nil, func(records) state.ExecutionState { return failed("exit code 3") }},
		{"killed", "exit 0", func(t *testing.T, h *harness, id runtime.ID, g gate, _ <-chan struct{}) {
			pid, err := h.rt.PID(id)
			if err != nil {
				t.Fatal(err)
			}
			mustKill(t, pid, syscall.SIGKILL)
		}, func(records) state.ExecutionState { return failed("killed by signal 9") }},
		// A shim killed on its own leaves its workload running: the watch
		// fires, the state stays, and the next watch is on the workload,
		// whose end nobody records.
		{"shim killed", "exit 0", func(t *testing.T, h *harness, id runtime.ID, g gate, armed <-chan struct{}) {
			mustKill(t, h.records(id).shim.PID, syscall.SIGKILL)
			waitClosed(t, armed, "the shim was killed")
			if st := h.state(id); st != state.RunningOk {
				t.Fatalf("state %v after the shim died, want Running(Ok)", st)
			}
			next := h.watch(context.Background(), id)
			g.open(t)
			waitClosed(t, next, "the workload ended")
		}, func(rs records) state.ExecutionState {
			return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
				AdditionalInfo: fmt.Sprintf("process %d is gone and its exit was not recorded", rs.child.PID)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			t.Parallel()
			g := newGate(t)
			id := h.create(h.spec(strings.ReplaceAll(tt.name, " ", "_"), g.script(tt.then)))
			rs := h.records(id)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := h.watch(ctx, id)
			if st := h.state(id); st != state.RunningOk {
				t.Fatalf("state %v, want Running(Ok)", st)
			}
			if tt.end == nil {
				g.open(t)
			} else {
				tt.end(t, h, id, g, ch)
			}
			t.Logf("watch fired %v after the ending", waitClosed(t, ch, tt.name))
			if st, want := h.state(id), tt.want(rs); st != want {
				t.Fatalf("state %v after the watch fired, want %v", st, want)
			}
			// Ended: nothing is left to watch.
			if ch, err := h.rt.Watch(ctx, id); ch != nil || err != nil {
				t.Fatalf("Watch of an ended instance: %v, %v; want nil, nil", ch, err)
			}
		})
	}
}

func TestWatchOfWhatCannotChange(t *testing.T) {
	skipWithoutPidfd(t)
	t.Parallel()
	h := newHarness(t, Config{})
	ended := h.create(h.spec("ended", "command: 'true'"))
	h.waitState(ended, state.SucceededOk)
	unknown := runtime.ID(state.NewInstanceName("never", "agentA", "x").String())
	for _, id := range []runtime.ID{ended, unknown, "not an id"} {
		if ch, err := h.rt.Watch(context.Background(), id); ch != nil || err != nil {
			t.Errorf("Watch(%q): %v, %v; want nil, nil", id, ch, err)
		}
	}
}

// A watch whose context ends leaves no goroutine and no descriptor.
func TestWatchEndsWithItsContext(t *testing.T) {
	skipWithoutPidfd(t)
	h := newHarness(t, Config{})
	id := h.create(h.spec("sleeper", "command: sleep\nargs: ['60']"))
	goroutines, fds := goruntime.NumGoroutine(), openFDs(t)
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		ch := h.watch(ctx, id)
		cancel()
		select {
		case <-ch:
			t.Fatal("a cancelled watch fired")
		default:
		}
	}
	testwait.For(t, bound, func() bool { return goruntime.NumGoroutine() <= goroutines && openFDs(t) <= fds },
		"goroutines %d and fds %d as before (%v)", goroutines, fds,
		testwait.Lazy(func() string { return fmt.Sprintf("goroutines %d, fds %d", goruntime.NumGoroutine(), openFDs(t)) }))
}

// openFDs counts this process's pidfds; other descriptors come and go
// with the runtime and the other tests.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// The agent reaps each shim it started; waiting for that parks a
// goroutine in the netpoller instead of an OS thread in wait(2) for the
// workload's whole life.
func TestShimsHoldNoThread(t *testing.T) {
	skipWithoutPidfd(t)
	h := newHarness(t, Config{})
	before := threads(t)
	const n = 12
	for i := range n {
		h.create(h.spec(fmt.Sprintf("sleeper%d", i), "command: sleep\nargs: ['60']"))
	}
	if grown := threads(t) - before; grown >= n/2 {
		t.Fatalf("%d workloads added %d threads", n, grown)
	}
}

func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// reports collects a Manager's reports and tells when one arrives.
type reports struct {
	mu  sync.Mutex
	all []state.WorkloadState
	at  []time.Time
}

func (r *reports) report(ws []state.WorkloadState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		r.all = append(r.all, w)
		r.at = append(r.at, time.Now())
	}
}

// wait returns when inst was reported in s.
func (r *reports) wait(t *testing.T, inst state.InstanceName, s state.ExecutionState) time.Time {
	t.Helper()
	var at time.Time
	testwait.For(t, bound, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, w := range r.all {
			if w.Instance == inst && w.State == s {
				at = r.at[i]
				return true
			}
		}
		return false
	}, "%s reported %v", inst.WorkloadName, s)
	return at
}

// The agent's control loops report a workload's exit without asking for
// its state: the Manager's clock stands still, so no poll and no backstop
// round can run, and the exit is reported all the same, within half a
// second (the poll interval it used to wait for) in the median.
func TestManagerReportsExitsWithoutPolling(t *testing.T) {
	skipWithoutPidfd(t)
	h := newHarness(t, Config{})
	rep := &reports{}
	m := workload.NewManager(workload.Config{
		Agent:     "agentA",
		RunFolder: h.runFolder,
		Runtimes:  map[string]runtime.Runtime{"process": h.rt},
		Report:    rep.report,
		Clock:     clock.NewFake(time.Unix(1_700_000_000, 0)),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer m.Close()

	const n = 5
	var (
		insts []state.InstanceName
		gates []gate
		added []workload.Added
	)
	for i := range n {
		g := newGate(t)
		cfg := g.script("exit 4")
		w := &state.Workload{Agent: "agentA", Runtime: "process", RuntimeConfig: cfg, RestartPolicy: state.RestartNever}
		inst := state.NewInstanceName(fmt.Sprintf("w%d", i), "agentA", cfg)
		insts, gates = append(insts, inst), append(gates, g)
		added = append(added, workload.Added{Instance: inst, Workload: w})
	}
	m.Update(added, nil)
	for _, inst := range insts {
		rep.wait(t, inst, state.RunningOk)
	}
	var latencies []time.Duration
	for i, inst := range insts {
		start := time.Now()
		gates[i].open(t)
		latencies = append(latencies, rep.wait(t, inst, failed("exit code 4")).Sub(start))
	}
	slices.Sort(latencies)
	t.Logf("exit → report: %v", latencies)
	if median := latencies[n/2]; median >= 500*time.Millisecond {
		t.Fatalf("median exit → report %v, want under 500 ms", median)
	}
	m.Update(nil, func() []workload.Deleted {
		var d []workload.Deleted
		for _, inst := range insts {
			d = append(d, workload.Deleted{Instance: inst})
		}
		return d
	}())
	for _, inst := range insts {
		rep.wait(t, inst, state.Removed)
	}
}
