package servercmd

import (
	"io"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"
)

// fakeGC drives a gcTuner: a clock and an allocation counter the test
// moves, the percents the tuner set, and its one pending check.
type fakeGC struct {
	now      time.Time
	allocs   uint64
	percents []int
	procs    []int
	pending  func()
	delay    time.Duration
	stops    int
}

func newFakeTuner(f *fakeGC) *gcTuner {
	t := newGCTuner(400, 50, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.set = func(p int) { f.percents = append(f.percents, p) }
	t.procs = func(n int) { f.procs = append(f.procs, n) }
	t.allocs = func() uint64 { return f.allocs }
	t.now = func() time.Time { return f.now }
	t.after = func(d time.Duration, fn func()) func() bool {
		f.pending, f.delay = fn, d
		return func() bool { f.stops++; f.pending = nil; return true }
	}
	return t
}

// advance moves the clock by d while bytes are allocated.
func (f *fakeGC) advance(d time.Duration, bytes uint64) {
	f.now = f.now.Add(d)
	f.allocs += bytes
}

// fire runs the pending check, as its timer would.
func (f *fakeGC) fire(t *testing.T) {
	t.Helper()
	fn := f.pending
	if fn == nil {
		t.Fatal("no check pending")
	}
	f.pending = nil
	fn()
}

func TestGCTunerSwitchesWithAllocationRate(t *testing.T) {
	f := &fakeGC{now: time.Unix(1000, 0)}
	g := newFakeTuner(f)
	g.start()
	if !slices.Equal(f.percents, []int{400}) || f.pending == nil || f.delay != gcCheckEvery {
		t.Fatalf("after start: percents %v, check pending %t after %v; want the busy target and a check", f.percents, f.pending != nil, f.delay)
	}
	idled := 0
	g.onIdle = func() { idled++ }
	// The start was busy; then it calms down.
	f.advance(gcCheckEvery, 64<<20)
	f.fire(t)
	if len(f.percents) != 1 || f.pending == nil || idled != 0 {
		t.Fatalf("busy start went idle: percents %v, idle hook ran %d times", f.percents, idled)
	}
	f.advance(gcCheckEvery, 1<<20)
	f.fire(t)
	if !slices.Equal(f.percents, []int{400, 50}) || f.pending != nil {
		t.Fatalf("after a quiet check: percents %v, check pending %t; want the idle target and no timer", f.percents, f.pending != nil)
	}
	if idled != 1 {
		t.Fatalf("turning idle ran the idle hook %d times, want once", idled)
	}
	f.percents = f.percents[1:]

	// Idle: a collection every few seconds at a few hundred KiB/s.
	for range 3 {
		f.advance(4*time.Second, 1<<20)
		if !g.gcDone() {
			t.Fatal("the tuner stopped listening to collections")
		}
	}
	if len(f.percents) != 1 || f.pending != nil {
		t.Fatalf("idle replica: percents %v, check pending %t", f.percents, f.pending != nil)
	}

	// Load: collections every 100 ms, 1 MiB each; judged once a second
	// has passed.
	for range 9 {
		f.advance(100*time.Millisecond, 1<<20)
		g.gcDone()
	}
	if len(f.percents) != 1 {
		t.Fatalf("judged a rate over less than %v: percents %v", gcMinWindow, f.percents)
	}
	f.advance(100*time.Millisecond, 1<<20)
	g.gcDone()
	if !slices.Equal(f.percents, []int{50, 400}) {
		t.Fatalf("percents under load %v, want the busy target", f.percents)
	}
	if f.pending == nil || f.delay != gcCheckEvery {
		t.Fatalf("busy replica: check pending %t after %v, want one after %v", f.pending != nil, f.delay, gcCheckEvery)
	}
	// More collections under load change nothing.
	f.advance(time.Second, 8<<20)
	g.gcDone()
	if len(f.percents) != 2 {
		t.Fatalf("percents %v", f.percents)
	}

	// Still busy at the check, and between the two rates: stays busy.
	f.advance(gcCheckEvery-time.Second, 40<<20)
	f.fire(t)
	f.advance(gcCheckEvery, uint64(gcCheckEvery.Seconds())*(gcIdleRate+gcBusyRate)/2)
	f.fire(t)
	if len(f.percents) != 2 || f.pending == nil {
		t.Fatalf("a busy replica went idle: percents %v, check pending %t", f.percents, f.pending != nil)
	}

	// The load stops: back to the idle target, and no timer any more.
	f.advance(gcCheckEvery, 2<<20)
	f.fire(t)
	if !slices.Equal(f.percents, []int{50, 400, 50}) {
		t.Fatalf("percents after the load %v, want the idle target again", f.percents)
	}
	if f.pending != nil {
		t.Fatal("an idle replica kept a timer")
	}

	// The collection the lower target starts at once, then slow cycles,
	// keep it idle.
	f.advance(5*time.Millisecond, 256<<10)
	g.gcDone()
	f.advance(3*time.Second, 1<<20)
	g.gcDone()
	if len(f.percents) != 3 {
		t.Fatalf("percents %v", f.percents)
	}
}

func TestGCTunerStop(t *testing.T) {
	f := &fakeGC{now: time.Unix(1000, 0)}
	g := newFakeTuner(f)
	g.start()
	if f.pending == nil {
		t.Fatal("no check pending while busy")
	}
	check := f.pending
	g.stop()
	if f.stops != 1 || f.pending != nil {
		t.Fatalf("stop left the check pending (stops %d)", f.stops)
	}
	// A check that was already running when stop came, and later
	// collections, change nothing and end the collection hook.
	f.advance(gcCheckEvery, 0)
	check()
	f.advance(time.Second, 4<<20)
	if g.gcDone() {
		t.Fatal("a stopped tuner still wants to hear of collections")
	}
	if !slices.Equal(f.percents, []int{400}) {
		t.Fatalf("percents %v after stop", f.percents)
	}
}

// TestGCHookRunsAfterCollections: the hook hears of real collections
// and stops when its function says so.
func TestGCHookRunsAfterCollections(t *testing.T) {
	calls := make(chan int, 10)
	n := 0
	armGCHook(func() bool {
		n++
		calls <- n
		return n < 2
	})
	for want := 1; want <= 2; want++ {
		if got := collectUntil(t, calls); got != want {
			t.Fatalf("call %d, want %d", got, want)
		}
	}
	// Disarmed: a probe armed now hears of two more collections, by which
	// time a call of the first hook, had it re-armed, would have come.
	probe := make(chan int, 10)
	m := 0
	armGCHook(func() bool { m++; probe <- m; return m < 2 })
	collectUntil(t, probe)
	collectUntil(t, probe)
	select {
	case c := <-calls:
		t.Fatalf("the hook ran again (call %d) after it said stop", c)
	default:
	}
}

// collectUntil collects garbage until ch delivers, and returns what it
// delivered.
func collectUntil(t *testing.T, ch <-chan int) int {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		runtime.GC()
		select {
		case v := <-ch:
			return v
		case <-deadline:
			t.Fatal("no collection hook ran within a minute")
		default:
			runtime.Gosched()
		}
	}
}

func TestHeapProfileOffUnlessDebug(t *testing.T) {
	if runtime.MemProfileRate != 0 {
		t.Fatalf("heap profile sampling at %d bytes, want off", runtime.MemProfileRate)
	}
	if defaultMemProfileRate <= 0 {
		t.Fatalf("default rate %d", defaultMemProfileRate)
	}
	enableHeapProfile()
	defer func() { runtime.MemProfileRate = 0 }()
	if runtime.MemProfileRate != defaultMemProfileRate {
		t.Fatalf("rate %d after enableHeapProfile, want %d", runtime.MemProfileRate, defaultMemProfileRate)
	}
}

// An idle replica runs on idleProcs Ps and gets busyProcs back with its
// busy GC target; with idleProcs 0 the Ps are never touched.
func TestGCTunerSwitchesProcs(t *testing.T) {
	for _, idleProcs := range []int{0, 1} {
		f := &fakeGC{now: time.Unix(1000, 0)}
		g := newFakeTuner(f)
		g.busyProcs, g.idleProcs = 2, idleProcs
		g.start()
		f.advance(gcCheckEvery, 1<<20)
		f.fire(t) // quiet: idle
		f.advance(2*time.Second, 8<<20)
		g.gcDone() // 4 MiB/s: busy
		want := []int{1, 2}
		if idleProcs == 0 {
			want = nil
		}
		if !slices.Equal(f.percents, []int{400, 50, 400}) || !slices.Equal(f.procs, want) {
			t.Fatalf("idleProcs %d: percents %v, procs %v; want procs %v", idleProcs, f.percents, f.procs, want)
		}
	}
}
