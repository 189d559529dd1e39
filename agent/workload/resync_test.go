package workload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// The comparison of a resync, on its own: each row names the drift it
// proves is found, or that nothing is found where nothing drifted.
func TestCompareHost(t *testing.T) {
	inst := func(name string) state.InstanceName { return state.NewInstanceName(name, testAgent, "cfg") }
	svc, job, old := inst("svc"), inst("job"), inst("old")
	found := func(rt string, in state.InstanceName, id runtime.ID) hostInstance {
		return hostInstance{rtName: rt, Found: runtime.Found{Instance: in, ID: id}}
	}
	both := map[string]bool{"podman": true, "process": true}
	tests := []struct {
		name   string
		loops  []held
		found  []hostInstance
		listed map[string]bool
		want   []drift
	}{{
		name:   "no drift: every watched instance is listed, nothing else is",
		loops:  []held{{svc, "podman", "c1", true}, {job, "process", "job-id", true}},
		found:  []hostInstance{found("podman", svc, "c1"), found("process", job, "job-id")},
		listed: both,
	}, {
		name:   "missing: a watched container was removed (podman rm -f)",
		loops:  []held{{svc, "podman", "c1", true}, {job, "process", "job-id", true}},
		found:  []hostInstance{found("process", job, "job-id")},
		listed: both,
		want:   []drift{{kind: driftRemoved, inst: svc, rt: "podman", id: "c1"}},
	}, {
		name:   "replaced: another container carries the watched one's instance name",
		loops:  []held{{svc, "podman", "c1", true}},
		found:  []hostInstance{found("podman", svc, "c2")},
		listed: both,
		want: []drift{
			{kind: driftReplaced, inst: svc, rt: "podman", id: "c1", by: "c2"},
			{kind: driftUnknown, inst: svc, rt: "podman", id: "c2"},
		},
	}, {
		name:   "unknown: a container with the agent's labels no loop stands for",
		loops:  []held{{svc, "podman", "c1", true}},
		found:  []hostInstance{found("podman", svc, "c1"), found("podman", old, "c9")},
		listed: both,
		want:   []drift{{kind: driftUnknown, inst: old, rt: "podman", id: "c9"}},
	}, {
		name:   "in flight: an instance whose loop is creating it is not unknown",
		loops:  []held{{svc, "podman", "", false}},
		found:  []hostInstance{found("podman", svc, "c3")},
		listed: both,
	}, {
		name:   "not watching: a loop that starts or deletes its instance is not missing it",
		loops:  []held{{svc, "podman", "c1", false}},
		listed: both,
	}, {
		name:   "a runtime whose List failed is left alone",
		loops:  []held{{svc, "podman", "c1", true}},
		listed: map[string]bool{"process": true},
	}, {
		name:   "a silent loop deleting a leftover holds it",
		loops:  []held{{old, "podman", "c9", false}},
		found:  []hostInstance{found("podman", old, "c9")},
		listed: both,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := compareHost(tc.loops, tc.found, tc.listed)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("compareHost = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The reasons are structured so that the server's records can show and
// match them: "drift: <what>[ (<detail>)]; repair: <repair>".
func TestDriftReasons(t *testing.T) {
	inst := state.NewInstanceName("svc", testAgent, "cfg")
	long := runtime.ID("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	tests := []struct{ got, want string }{
		{lostInfo(drift{kind: driftRemoved, inst: inst}, "process 42 is gone and its exit was not recorded", state.RestartAlways, true),
			"drift: removed behind the agent's back (process 42 is gone and its exit was not recorded); repair: restart (restartPolicy ALWAYS)"},
		{lostInfo(drift{kind: driftReplaced, inst: inst, by: long}, "", state.RestartNever, false),
			"drift: replaced behind the agent's back by 0123456789ab; repair: none (restartPolicy NEVER)"},
		{unknownInfo(drift{kind: driftUnknown, inst: inst, rt: "podman", id: long}),
			"drift: unknown instance with the agent's labels (podman 0123456789ab); repair: removed by resync"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("reason\n got %q\nwant %q", tc.got, tc.want)
		}
	}
}

// A round that finds nothing wrong reports nothing: no message to the
// server, no Raft entry.
func TestResyncWithoutDriftSendsNothing(t *testing.T) {
	h := newHarness(t)
	a, b := workload("a", "cfg-a"), workload("b", "cfg-b", withPolicy(state.RestartAlways))
	h.m.ServerHello(context.Background(), []Added{a, b})
	h.waitLast(a.Instance, state.RunningOk)
	h.waitLast(b.Instance, state.RunningOk)
	h.settle(5)
	h.rec.mu.Lock()
	before := len(h.rec.all)
	h.rec.mu.Unlock()
	for range 3 {
		h.m.resync(context.Background())
	}
	h.settle(5)
	h.rec.mu.Lock()
	after := len(h.rec.all)
	h.rec.mu.Unlock()
	if after != before {
		t.Fatalf("resync without drift reported %d states", after-before)
	}
	if ev := h.rt.eventLog(); len(ev) != 2 {
		t.Fatalf("runtime calls %v, want only the two creates", ev)
	}
}

// An unknown instance with the agent's labels is deleted and its removal
// reported with the reason; the instances the server wants are not
// touched.
func TestResyncRemovesUnknownInstance(t *testing.T) {
	h := newHarness(t)
	a := workload("a", "cfg-a")
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitLast(a.Instance, state.RunningOk)
	stray := workload("stray", "cfg-s")
	strayID := h.rt.preload(stray.Instance, state.RunningOk)
	theirs := state.NewInstanceName("theirs", "agent_B", "cfg")
	h.rt.preload(theirs, state.RunningOk)

	h.m.resync(context.Background())
	removed := state.Removed
	removed.AdditionalInfo = "drift: unknown instance with the agent's labels (mem " + string(strayID) + "); repair: removed by resync"
	h.waitState(stray.Instance, removed)
	if _, ok := h.rt.liveID(stray.Instance); ok {
		t.Fatal("the unknown instance is still there")
	}
	if _, ok := h.rt.liveID(theirs); !ok {
		t.Fatal("another agent's instance was removed")
	}
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("a created %d times", n)
	}
}

// Before the first ServerHello the agent does not know what it should
// run: a resync then changes nothing.
func TestResyncWaitsForServerHello(t *testing.T) {
	h := newHarness(t)
	left := workload("left", "cfg")
	h.rt.preload(left.Instance, state.RunningOk)
	h.m.resync(context.Background())
	h.m.ServerHello(context.Background(), []Added{left})
	h.waitLast(left.Instance, state.RunningOk)
	if ev := h.rt.eventLog(); len(ev) != 0 {
		t.Fatalf("runtime calls %v, want the instance adopted untouched", ev)
	}
}

// A watched instance replaced behind the agent's back: the loop reports
// the drift naming the replacement, its policy creates it again, and the
// replacement is removed.
func TestResyncRepairsReplacedInstance(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg", withPolicy(state.RestartAlways))
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitLast(a.Instance, state.RunningOk)
	marker := filepath.Join(h.run, testAgent+"_io", a.Instance.String(), "marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Replaced between two polls: the resync lists before the loop reads.
	h.rt.mu.Lock()
	for id, in := range h.rt.insts {
		if in.inst == a.Instance {
			delete(h.rt.insts, id)
		}
	}
	h.rt.insts["intruder"] = &memInst{inst: a.Instance, state: state.RunningOk}
	h.rt.mu.Unlock()
	h.m.resync(context.Background())

	testwait.For(t, waitWithin, func() bool {
		for _, s := range h.rec.history(a.Instance) {
			if s.Is(state.StateFailed, state.SubLost) {
				return true
			}
		}
		return false
	}, "a Failed(Lost) for svc (history %v)", h.rec.history(a.Instance))
	testwait.For(t, waitWithin, func() bool { return h.rt.createCount(a.Instance) == 2 }, "svc created again")
	h.waitLast(a.Instance, state.RunningOk)
	testwait.For(t, waitWithin, func() bool {
		h.rt.mu.Lock()
		defer h.rt.mu.Unlock()
		_, there := h.rt.insts["intruder"]
		return !there
	}, "the replacement removed")
	testwait.For(t, waitWithin, func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return len(h.m.all) == 1
	}, "the loop that removed the replacement to end")
	// The replacement's loop leaves the run directory to the instance's.
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the instance's run directory was touched: %v", err)
	}
	var reasons []string
	for _, s := range h.rec.history(a.Instance) {
		if s.Is(state.StateFailed, state.SubLost) {
			reasons = append(reasons, s.AdditionalInfo)
		}
	}
	// The poll may see the instance gone before the resync names the
	// replacement; either reason is a drift with a restart.
	for _, r := range reasons {
		if r != "drift: replaced behind the agent's back by intruder; repair: restart (restartPolicy ALWAYS)" &&
			r != "drift: removed behind the agent's back; repair: restart (restartPolicy ALWAYS)" {
			t.Fatalf("Failed(Lost) reason %q", r)
		}
	}
}

// The rounds come every ResyncInterval on the Manager's clock; Resync
// asks for one at once.
func TestResyncRounds(t *testing.T) {
	h := newHarness(t, withFakeClock(), func(h *harness, c *Config) { c.ResyncInterval = time.Minute })
	a := workload("a", "cfg-a")
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitLast(a.Instance, state.RunningOk)

	stray := workload("stray", "cfg-s")
	h.rt.preload(stray.Instance, state.RunningOk)
	h.clk.Advance(59 * time.Second) // no round is due: nothing can remove it
	if _, ok := h.rt.liveID(stray.Instance); !ok {
		t.Fatal("removed before the round")
	}
	testwait.For(t, waitWithin, func() bool {
		h.clk.Advance(time.Second)
		_, ok := h.rt.liveID(stray.Instance)
		return !ok
	}, "the periodic round to remove the unknown instance")

	again := workload("again", "cfg-g")
	h.rt.preload(again.Instance, state.RunningOk)
	h.m.Resync()
	testwait.For(t, waitWithin, func() bool {
		_, ok := h.rt.liveID(again.Instance)
		return !ok
	}, "the requested round to remove the unknown instance")
}
