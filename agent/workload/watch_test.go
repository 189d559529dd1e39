package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// memWatcher is a memRuntime that watches its instances as the process
// runtime does with pidfds: Watch hands out a channel that notify closes,
// and a nil channel for an instance that is no longer running.
type memWatcher struct {
	*memRuntime

	wmu    sync.Mutex // guards the fields below
	chans  map[runtime.ID][]chan struct{}
	armed  int   // Watch calls
	active int   // watches whose context has not ended
	fail   error // Watch's error, when set
}

var _ runtime.Watcher = (*memWatcher)(nil)

func newMemWatcher(rt *memRuntime) *memWatcher {
	return &memWatcher{memRuntime: rt, chans: map[runtime.ID][]chan struct{}{}}
}

func (w *memWatcher) Watch(ctx context.Context, id runtime.ID) (<-chan struct{}, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.armed++
	if w.fail != nil {
		return nil, w.fail
	}
	w.mu.Lock()
	in, ok := w.insts[id]
	running := ok && in.state == state.RunningOk
	w.mu.Unlock()
	if !running {
		return nil, nil
	}
	ch := make(chan struct{})
	w.chans[id] = append(w.chans[id], ch)
	w.active++
	context.AfterFunc(ctx, func() {
		w.wmu.Lock()
		defer w.wmu.Unlock()
		w.active--
	})
	return ch, nil
}

// change sets the state of inst's live instance and fires its watches,
// as an exit does.
func (w *memWatcher) change(t *testing.T, inst state.InstanceName, s state.ExecutionState) {
	t.Helper()
	w.set(t, inst, s)
	id, _ := w.liveID(inst)
	w.wmu.Lock()
	defer w.wmu.Unlock()
	for _, ch := range w.chans[id] {
		close(ch)
	}
	delete(w.chans, id)
}

func (w *memWatcher) counts() (armed, active int) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return w.armed, w.active
}

func (w *memWatcher) setFail(err error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.fail = err
}

const testBackstop = 10 * time.Second

// watchHarness is a harness on a fake clock whose "mem" runtime watches
// its instances, with a polled runtime "poll" beside it for a ticker.
type watchHarness struct {
	*harness
	w    *memWatcher
	poll *memRuntime
}

func newWatchHarness(t *testing.T) *watchHarness {
	wh := &watchHarness{poll: newMemRuntime("poll")}
	wh.harness = newHarness(t, withFakeClock(), func(h *harness, c *Config) {
		wh.w = newMemWatcher(h.rt)
		c.Runtimes = map[string]runtime.Runtime{"mem": wh.w, "poll": wh.poll}
		c.Backstop = testBackstop
	})
	return wh
}

// tickerWorkload runs on the polled runtime.
func tickerWorkload() Added { return workload("ticker", "tick", withRuntime("poll")) }

// rounds advances the clock by n poll intervals, each time waiting until
// the ticker's loop has polled: proof that the loops saw the time pass.
func (wh *watchHarness) rounds(n int) {
	wh.t.Helper()
	for range n {
		start := wh.poll.pollCount()
		wh.clk.Advance(100 * time.Millisecond)
		// The ticker arms its next timer just after it polled; an Advance
		// that came first passed it by. Wait for the ticker to arm it
		// (it is then the earliest timer) before the next round.
		testwait.For(wh.t, waitWithin, func() bool { return wh.poll.pollCount() > start }, "the ticker to poll")
		testwait.For(wh.t, waitWithin, func() bool { return wh.pollArmed() }, "the ticker to wait again")
	}
}

// pollArmed reports whether a timer is pending within one poll interval:
// the ticker's, since the backstop round is seconds away.
func (wh *watchHarness) pollArmed() bool {
	next, ok := wh.clk.Next()
	return ok && !next.After(wh.clk.Now().Add(100*time.Millisecond))
}

func TestWatchedInstanceIsNotPolled(t *testing.T) {
	wh := newWatchHarness(t)
	tk := tickerWorkload()
	wh.m.Update([]Added{tk}, nil)
	wh.waitState(tk.Instance, state.RunningOk)
	a := workload("watched", "cfg")
	wh.m.Update([]Added{a}, nil)
	wh.waitState(a.Instance, state.RunningOk)
	testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 1 }, "the watch to be armed")

	polls := wh.rt.pollCount()
	wh.rounds(30) // 3 s of poll intervals, short of the backstop
	if got := wh.rt.pollCount(); got != polls {
		t.Fatalf("a watched instance was asked for its state %d times in 30 poll intervals", got-polls)
	}
	if armed, active := wh.w.counts(); armed != 1 || active != 1 {
		t.Fatalf("watch armed %d times, %d active; want 1 and 1", armed, active)
	}
}

// An ending the runtime announces is reported without the clock moving,
// and the restart policy acts on it.
func TestWatchedEndingReportedAtOnce(t *testing.T) {
	tests := []struct {
		name     string
		policy   state.RestartPolicy
		end      state.ExecutionState
		restarts bool
	}{
		{"succeeded, never", state.RestartNever, state.SucceededOk, false},
		{"failed, never", state.RestartNever, execFailed, false},
		{"failed, on failure", state.RestartOnFailure, execFailed, true},
		{"succeeded, always", state.RestartAlways, state.SucceededOk, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := newWatchHarness(t)
			a := workload("w", "cfg", withPolicy(tt.policy))
			wh.m.Update([]Added{a}, nil)
			wh.waitState(a.Instance, state.RunningOk)
			testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 1 }, "the watch to be armed")
			now := wh.clk.Now()

			wh.w.change(t, a.Instance, tt.end)
			wh.waitState(a.Instance, tt.end)
			if tt.restarts {
				testwait.For(t, waitWithin, func() bool { return wh.rt.createCount(a.Instance) == 2 }, "the restart")
				wh.waitLast(a.Instance, state.RunningOk)
			}
			if !wh.clk.Now().Equal(now) {
				t.Fatal("the clock moved")
			}
			if !tt.restarts {
				// The instance has ended: nothing is left to watch.
				testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 0 }, "the watch to end")
				if n := wh.rt.createCount(a.Instance); n != 1 {
					t.Fatalf("created %d times", n)
				}
			}
		})
	}
}

// What the runtime does not announce is seen at the backstop round, not
// before; every watching loop shares that one timer.
func TestBackstopCatchesUnannouncedChanges(t *testing.T) {
	wh := newWatchHarness(t)
	a, b := workload("a", "cfg-a"), workload("b", "cfg-b")
	wh.m.Update([]Added{a, b}, nil)
	wh.waitState(a.Instance, state.RunningOk)
	wh.waitState(b.Instance, state.RunningOk)
	// Two watches, one backstop timer and no poll timer.
	testwait.For(t, waitWithin, func() bool {
		_, active := wh.w.counts()
		return active == 2 && wh.clk.Pending() == 1
	}, "one timer for both loops")

	wh.rt.set(t, a.Instance, lost) // no event: the record vanished
	tk := tickerWorkload()
	wh.m.Update([]Added{tk}, nil)
	wh.waitState(tk.Instance, state.RunningOk)
	wh.rounds(int(testBackstop/(100*time.Millisecond)) - 5)
	if got, _ := wh.rec.last(a.Instance); got != state.RunningOk {
		t.Fatalf("reported %v before the backstop round", got)
	}
	wh.rounds(5)
	wh.waitLost(a.Instance, "drift: removed behind the agent's back; repair: none (restartPolicy NEVER)")
	if got, _ := wh.rec.last(b.Instance); got != state.RunningOk {
		t.Fatalf("b reported %v", got)
	}
}

// A runtime that cannot watch an instance now is polled every
// PollInterval until it can again.
func TestWatchErrorFallsBackToPolling(t *testing.T) {
	wh := newWatchHarness(t)
	wh.w.setFail(errors.New("no pidfd"))
	tk := tickerWorkload()
	wh.m.Update([]Added{tk}, nil)
	wh.waitState(tk.Instance, state.RunningOk)
	a := workload("polled", "cfg")
	wh.m.Update([]Added{a}, nil)
	wh.waitState(a.Instance, state.RunningOk)

	polls := wh.rt.pollCount()
	wh.rounds(5)
	testwait.For(t, waitWithin, func() bool { return wh.rt.pollCount() >= polls+4 }, "polls")
	wh.rt.set(t, a.Instance, execFailed) // no event
	wh.rounds(2)
	wh.waitLast(a.Instance, execFailed)

	// Watching again once the runtime can.
	wh.w.setFail(nil)
	wh.rt.set(t, a.Instance, state.RunningOk)
	wh.rounds(2)
	wh.waitLast(a.Instance, state.RunningOk)
	testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 1 }, "the watch to be armed")
	polls = wh.rt.pollCount()
	wh.rounds(10)
	if got := wh.rt.pollCount(); got != polls {
		t.Fatalf("polled %d times after the watch was armed again", got-polls)
	}
}

// Watches end with their round, a delete and Close: none is left behind.
func TestWatchesEnd(t *testing.T) {
	wh := newWatchHarness(t)
	var added []Added
	for i := range 3 {
		added = append(added, workload(fmt.Sprintf("w%d", i), fmt.Sprintf("cfg%d", i), withPolicy(state.RestartAlways)))
	}
	wh.m.Update(added, nil)
	for _, a := range added {
		wh.waitState(a.Instance, state.RunningOk)
	}
	// Ten endings and restarts of w0: one watch at a time.
	for i := range 10 {
		testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 3 }, "the watches to be armed")
		wh.w.change(t, added[0].Instance, state.SucceededOk)
		testwait.For(t, waitWithin, func() bool { return wh.rt.createCount(added[0].Instance) == i+2 }, "the restart")
	}
	testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 3 }, "the watches to be armed")
	wh.m.Update(nil, []Deleted{{Instance: added[1].Instance}})
	wh.waitState(added[1].Instance, state.Removed)
	testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 2 }, "the deleted instance's watch to end")
	wh.close()
	// Close ended every watch's context; the fake counts the end in a
	// context.AfterFunc, which runs in a goroutine of its own.
	testwait.For(t, waitWithin, func() bool { _, active := wh.w.counts(); return active == 0 }, "every watch to end after Close")
}
