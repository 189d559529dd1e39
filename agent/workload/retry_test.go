package workload

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1
func TestBackoffCap(t *testing.T) {
	tests := []struct {
		n    int
		want time.Duration
	}{
		{0, 500 * time.Millisecond},
		{1, time.Second},
		{2, 2 * time.Second},
		{5, 16 * time.Second},
		{9, 256 * time.Second},
		{10, 300 * time.Second},
		{64, 300 * time.Second},
		{1 << 20, 300 * time.Second},
	}
	for _, tt := range tests {
		if got := backoffCap(tt.n); got != tt.want {
			t.Errorf("backoffCap(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestFullJitterStaysWithinCap(t *testing.T) {
	const limit = 2 * time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := fullJitter(limit)
		if d < 0 || d > limit {
			t.Fatalf("fullJitter(%v) = %v", limit, d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct waits in 1000 draws: not jittered", len(seen))
	}
	if fullJitter(0) != 0 {
		t.Fatal("fullJitter(0) != 0")
	}
}

// capRecorder is a jitter that waits the whole cap and remembers it.
type capRecorder struct {
	mu   sync.Mutex
	caps []time.Duration
}

func (c *capRecorder) jitter(limit time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.caps = append(c.caps, limit)
	return limit
}

func (c *capRecorder) get() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.caps...)
}

// swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1
// swdd~agent-workload-control-loop-exponential-backoff-retries~1
// swdd~agent-workload-control-loop-executes-retry~1
func TestCreateRetriesWithBackoff(t *testing.T) {
	h := newHarness(t, withFakeClock())
	caps := &capRecorder{}
	h.m.jitter = caps.jitter
	boom := errors.New("image not found")
	h.rt.failCreate = func(s runtime.Spec, n int) error {
		if n <= 3 {
			return boom
		}
		return nil
	}
	a := workload("flaky", "cfg")
	h.m.Update([]Added{a}, nil)

	for i, wait := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		h.waitState(a.Instance, retrying(i+1, boom))
		testwait.For(t, waitWithin, func() bool { return h.clk.Pending() == 1 }, "the backoff timer")
		h.clk.Advance(wait - time.Millisecond)
		if n := h.rt.createCount(a.Instance); n != i+1 || h.clk.Pending() != 1 {
			t.Fatalf("retry %d ran before its backoff (%d creates)", i+1, n)
		}
		h.clk.Advance(time.Millisecond)
		testwait.For(t, waitWithin, func() bool { return h.rt.createCount(a.Instance) == i+2 }, "the retry")
	}
	h.waitLast(a.Instance, state.RunningOk)
	want := []state.ExecutionState{startingTriggered, retrying(1, boom), retrying(2, boom), retrying(3, boom), state.RunningOk}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if got := h.rec.history(a.Instance)[1]; got.State != state.StatePending || got.SubState != state.SubStarting || got.AdditionalInfo != "Retry 1: image not found" {
		t.Fatalf("retry state %+v", got)
	}
	if got, want := fmt.Sprint(caps.get()), fmt.Sprint([]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}); got != want {
		t.Fatalf("backoff caps %v, want %v", got, want)
	}
}

// A newer update or a delete cancels the pending retry.
//
// swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2
func TestCreateRetryCancelled(t *testing.T) {
	boom := errors.New("no such image")
	old := workload("svc", "cfg-broken")
	fixed := workload("svc", "cfg-fixed")
	tests := []struct {
		name    string
		added   []Added
		deleted []Deleted
	}{
		{"by delete", nil, []Deleted{{Instance: old.Instance}}},
		{"by update", []Added{fixed}, []Deleted{{Instance: old.Instance}}},
		{"by an added of the same workload", []Added{fixed}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withFakeClock())
			h.m.jitter = func(limit time.Duration) time.Duration { return limit }
			h.rt.failCreate = func(s runtime.Spec, n int) error {
				if s.Instance == old.Instance {
					return boom
				}
				return nil
			}
			h.m.Update([]Added{old}, nil)
			h.waitState(old.Instance, retrying(1, boom))
			testwait.For(t, waitWithin, func() bool { return h.clk.Pending() == 1 }, "the backoff timer")

			h.m.Update(tt.added, tt.deleted)
			h.waitLast(old.Instance, state.Removed)
			want := []state.ExecutionState{startingTriggered, retrying(1, boom), requested, state.Removed}
			if got := h.rec.history(old.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("old instance history %v, want %v", got, want)
			}
			if len(tt.added) > 0 {
				h.waitState(fixed.Instance, state.RunningOk)
				if h.rec.index(old.Instance, state.Removed) > h.rec.index(fixed.Instance, startingTriggered) {
					t.Fatal("the new instance started before the old one was removed")
				}
			}
			h.clk.Advance(time.Hour)
			h.clk.Advance(time.Hour)
			if n := h.rt.createCount(old.Instance); n != 1 {
				t.Fatalf("the cancelled retry ran: %d creates", n)
			}
		})
	}
}

// A config the runtime refuses only at Create (podman-kube: workload
// files, a control interface target that is not in the manifest) is
// Pending(StartingFailed) at once, like one Check refuses: no retry can
// cure it.
func TestCreateBadConfigNotRetried(t *testing.T) {
	h := newHarness(t, withFakeClock())
	bad := fmt.Errorf("runtimeConfig.controlInterfaceTarget: required: %w", runtime.ErrBadConfig)
	h.rt.failCreate = func(runtime.Spec, int) error { return bad }
	a := workload("kube", "cfg")
	h.m.Update([]Added{a}, nil)
	want := state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed, AdditionalInfo: bad.Error()}
	h.waitLast(a.Instance, want)
	h.clk.Advance(time.Hour)
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("%d creates, want 1: a bad config was retried", n)
	}
}

// A workload the agent's policy refuses (issue 27, hole 3: a podman
// container with --privileged and the host's root mounted) is not
// started: Pending(StartingFailed) at once naming the field and the
// level, never created nor retried; the same workload starts on an
// agent at privileged.
func TestPolicyRefusalNotStarted(t *testing.T) {
	const cfg = "image: alpine\ncommandOptions: [--privileged, -v, /:/host]"
	for _, tc := range []struct {
		level workloadpolicy.Level
		want  string
	}{
		{workloadpolicy.Baseline, `runtimeConfig.commandOptions[0]: "--privileged" gives the container every capability and the host's devices, without confinement; that needs the workload policy privileged, and the --workload-policy of agent 'agent_A' is baseline`},
		{workloadpolicy.Restricted, `runtimeConfig.commandOptions[0]: "--privileged"`},
		{workloadpolicy.Privileged, ""},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			pod := newMemRuntime("podman")
			h := newHarness(t, withFakeClock(), func(h *harness, c *Config) {
				c.Runtimes["podman"] = pod
				c.Policy = workloadpolicy.Policy{Level: tc.level, Owner: "the --workload-policy of agent 'agent_A'"}
			})
			a := workload("evil", cfg, withRuntime("podman"))
			h.m.Update([]Added{a}, nil)
			if tc.want == "" {
				h.waitState(a.Instance, state.RunningOk)
				return
			}
			var last state.ExecutionState
			testwait.For(t, waitWithin, func() bool {
				hist := h.rec.history(a.Instance)
				if len(hist) > 0 {
					last = hist[len(hist)-1]
				}
				return last.Is(state.StatePending, state.SubStartingFailed)
			}, "Pending(StartingFailed)")
			if !strings.Contains(last.AdditionalInfo, tc.want) || !strings.HasSuffix(last.AdditionalInfo, "agent 'agent_A' is "+tc.level.String()) {
				t.Fatalf("refused with %q, want %q at %s", last.AdditionalInfo, tc.want, tc.level)
			}
			h.clk.Advance(time.Hour)
			if n := pod.createCount(a.Instance); n != 0 {
				t.Fatalf("%d creates of a refused workload", n)
			}
		})
	}
}
