package servercmd

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/residency"
)

// defaultGCPercent lets the heap grow to three times its live data
// between collections instead of Go's twice while the replica is busy. A
// replica's live heap is small (the desired state and the leader's
// queues: a few MiB). It was 400, which under a steady stream of updates
// saved about a tenth of the CPU per update against Go's 100
// (docs/replication.md, "Where the time goes"); but the busy spells'
// larger heap left the idle heap spread over more spans (an idle mTLS
// leader had twice its live heap in spans in use), and an idle leader
// measured 14.7-15.2 MiB RSS with 400 and 14.0-14.3 MiB with 200,
// against a 15 MiB budget. At 200 the updates per second measured the
// same within the run-to-run spread (docs/operations.md).
const defaultGCPercent = 200

// defaultGCIdlePercent is the GC target while the replica allocates
// little, which is most of a vehicle's life: the heap may grow by a
// quarter of its live data. At idle a replica allocates a few hundred KiB
// a second (gossip, heartbeats, the agents' Watch), so this is a
// collection every few seconds of a 2–3 MiB heap, a millisecond or two
// of CPU each, and the heap stays a few MiB instead of the 16 MiB that
// 400 lets it reach (Go's heap minimum is 4 MiB times the target).
const defaultGCIdlePercent = 25

// defaultIdleProcs is GOMAXPROCS at idle (see gcTuner).
const defaultIdleProcs = 1

// A replica is busy when it allocated at least gcBusyRate bytes a second
// over the collections of at least gcMinWindow (a rate over a shorter
// span is noise: the collection that a switch to the idle target starts
// comes milliseconds after it), and idle again when it allocated less
// than gcIdleRate a second over gcCheckEvery. The GC's CPU grows with the
// allocation rate divided by the target, whatever the size of the live
// heap: at the idle target a replica spends 1–2 ms of CPU per MiB
// allocated, so below gcBusyRate the idle target costs at most a few
// tenths of a percent of a core; above it the busy target saves what it
// was chosen for. Idle, with 3 replicas and 5 agents, a follower
// allocates about 0.3 MiB/s and the leader 0.35–0.4 MiB/s, well below
// gcIdleRate. The two rates differ so that a load near the threshold does
// not flip the target at every collection.
const (
	gcBusyRate   = 2 << 20
	gcIdleRate   = 1 << 20
	gcCheckEvery = 5 * time.Second
	gcMinWindow  = time.Second
)

// setGC applies the GC targets unless the GOGC variable is set: Go has
// already read it, and an operator who sets it means it. idleProcs, when
// more than 0 and under GOMAXPROCS, is the number of Ps the replica runs
// on while idle, unless the GOMAXPROCS variable is set. It starts a
// gcTuner when either target switches, and returns its stop function (a
// no-op otherwise).
func setGC(busy, idle, idleProcs int, lookup func(string) (string, bool), log *slog.Logger) (stop func()) {
	busyProcs := runtime.GOMAXPROCS(0)
	if v, ok := lookup("GOMAXPROCS"); ok {
		if idleProcs > 0 {
			log.Info("GOMAXPROCS is set; --idle-procs is not applied", "GOMAXPROCS", v)
		}
		idleProcs = 0
	}
	if idleProcs >= busyProcs {
		idleProcs = 0
	}
	gogc, gogcSet := lookup("GOGC")
	switchGC := !gogcSet && idle < busy
	switch {
	case gogcSet:
		log.Info("GOGC is set; --gc-percent and --gc-idle-percent are not applied", "GOGC", gogc)
	case !switchGC:
		debug.SetGCPercent(busy)
	}
	if !switchGC && idleProcs == 0 {
		return func() {}
	}
	t := newGCTuner(busy, idle, log)
	if !switchGC {
		t.set = func(int) {}
	}
	t.busyProcs, t.idleProcs = busyProcs, idleProcs
	t.onIdle = dropCodePages(log)
	t.start()
	armGCHook(t.gcDone)
	return t.stop
}

// gcTuner switches Go's GC target, and the number of Ps, between busy
// (while the replica allocates fast, and at the start) and idle
// (otherwise). One P at idle: a replica's idle work is wake-ups (Raft
// heartbeats, gossip, Watch heartbeats), and with a second P every
// wake-up also wakes an idle thread to look for more work, which finds
// none and sleeps again; that was about a fifth of an idle replica's
// CPU. Busy, the replica gets every P back within about a second. It looks at the allocation rate
// after every collection, which at idle happens every few seconds
// anyway, and, only while busy, every gcCheckEvery: an idle replica at
// the busy target may go minutes without a collection, and would keep
// the heap it grew until then. So an idle replica has no timer of its
// own.
type gcTuner struct {
	busy, idle int
	log        *slog.Logger
	// set applies a GC percent (debug.SetGCPercent).
	set func(int)
	// busyProcs and idleProcs are the GOMAXPROCS of either mode; procs
	// applies one (runtime.GOMAXPROCS). idleProcs 0: not switched.
	busyProcs, idleProcs int
	procs                func(int)
	// allocs is the number of heap bytes allocated since the start.
	allocs func() uint64
	now    func() time.Time
	// after runs f once after d (time.AfterFunc) and returns what stops it.
	after func(d time.Duration, f func()) (stop func() bool)
	// onIdle runs, outside the lock, each time the replica turns idle:
	// it drops the code pages that start-up or the busy spell brought
	// in from the resident set (dropCodePages).
	onIdle func()

	mu        sync.Mutex
	isBusy    bool
	stopped   bool
	gcAt      time.Time // start of the window judged at the next collection
	gcAllocs  uint64
	chkAt     time.Time // the previous check while busy
	chkAllocs uint64
	stopTimer func() bool
}

func newGCTuner(busy, idle int, log *slog.Logger) *gcTuner {
	return &gcTuner{
		busy: busy, idle: idle, log: log,
		set:    func(p int) { debug.SetGCPercent(p) },
		procs:  func(n int) { runtime.GOMAXPROCS(n) },
		allocs: heapAllocs,
		now:    time.Now,
		after: func(d time.Duration, f func()) func() bool {
			return time.AfterFunc(d, f).Stop
		},
	}
}

// start applies the busy target: a replica starts busy (reading its log
// and snapshot, electing, answering the agents that reconnect), and at
// the idle target its first second spent a collection every 20 ms. The
// first check comes gcCheckEvery later.
func (t *gcTuner) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now, allocs := t.now(), t.allocs()
	t.gcAt, t.gcAllocs = now, allocs
	t.chkAt, t.chkAllocs = now, allocs
	t.isBusy = true
	t.set(t.busy)
	t.stopTimer = t.after(gcCheckEvery, t.check)
}

// gcDone runs after each collection; it reports whether it wants to hear
// of the next one.
func (t *gcTuner) gcDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	now, allocs := t.now(), t.allocs()
	if now.Sub(t.gcAt) < gcMinWindow {
		return true
	}
	rate := perSecond(allocs-t.gcAllocs, now.Sub(t.gcAt))
	t.gcAt, t.gcAllocs = now, allocs
	if !t.isBusy && rate >= gcBusyRate {
		t.isBusy = true
		t.chkAt, t.chkAllocs = now, allocs
		t.set(t.busy)
		if t.idleProcs > 0 {
			t.procs(t.busyProcs)
		}
		t.stopTimer = t.after(gcCheckEvery, t.check)
		t.log.Debug("GC target: busy", "percent", t.busy, "procs", t.busyProcs, "allocatedPerSecond", uint64(rate))
	}
	return true
}

// check runs every gcCheckEvery while busy.
func (t *gcTuner) check() {
	if t.checkLocked() && t.onIdle != nil {
		t.onIdle()
	}
}

// checkLocked judges the last gcCheckEvery and reports whether the
// replica turned idle.
func (t *gcTuner) checkLocked() (turnedIdle bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || !t.isBusy {
		return false
	}
	now, allocs := t.now(), t.allocs()
	rate := perSecond(allocs-t.chkAllocs, now.Sub(t.chkAt))
	t.chkAt, t.chkAllocs = now, allocs
	if rate >= gcIdleRate {
		t.stopTimer = t.after(gcCheckEvery, t.check)
		return false
	}
	t.isBusy = false
	t.stopTimer = nil
	t.gcAt, t.gcAllocs = now, allocs
	// Below the heap the busy target allowed, the lower target starts a
	// collection at the next allocation; the runtime then returns the
	// pages above the new goal to the OS in the background.
	t.set(t.idle)
	if t.idleProcs > 0 {
		t.procs(t.idleProcs)
	}
	t.log.Debug("GC target: idle", "percent", t.idle, "procs", t.idleProcs, "allocatedPerSecond", uint64(rate))
	return true
}

// dropCodePages is the tuner's onIdle: the replica's binary maps about
// 18 MiB of code and read-only data, nearly all of it resident after the
// start, of which an idle replica runs about 4 MiB
// (internal/residency). Dropping the rest from the resident set costs
// about a thousand minor faults, one a page, as the idle code comes
// back; nothing is read from disk or written.
func dropCodePages(log *slog.Logger) func() {
	return func() {
		d, err := residency.DropExecutablePages()
		if err != nil {
			log.Debug("code pages not dropped from the resident set", "err", err)
			return
		}
		log.Debug("code pages dropped from the resident set", "bytes", d.Bytes, "faultAround", d.FaultAround())
	}
}

// stop ends the switching; the target stays where it is.
func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.stopTimer != nil {
		t.stopTimer()
		t.stopTimer = nil
	}
}

func perSecond(bytes uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds()
}

// gcSentinel is allocated only to be collected: its cleanup tells of the
// collection. It holds a pointer so that the tiny allocator, which packs
// small pointer-free objects together, never places it.
type gcSentinel struct{ _ *byte }

// armGCHook calls fn after the next collection, and after each one after
// that for as long as fn returns true.
func armGCHook(fn func() bool) {
	runtime.AddCleanup(new(gcSentinel), func(fn func() bool) {
		if fn() {
			armGCHook(fn)
		}
	}, fn)
}

// heapAllocs reads the cumulative bytes allocated on the heap; unlike
// runtime.ReadMemStats it does not stop the world.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// defaultMemProfileRate is the runtime's heap profile sampling rate
// before init turned it off (GODEBUG=memprofilerate sets it too).
var defaultMemProfileRate = runtime.MemProfileRate

// Only --enable-debug serves a heap profile, but the runtime samples for
// one from the start. It keeps every sampled stack for good, in a
// 1.4 MiB hash table reserved at the first sample and touched a page per
// new stack, so what it costs grows with uptime, not with load; in the
// minute after a start it is too little to measure (at 32 times the
// default rate, under 0.2 MiB). It is off from here on and back on with
// --enable-debug (enableHeapProfile); a heap profile then misses only
// what was allocated between this init and reading the configuration.
func init() { runtime.MemProfileRate = 0 }

// enableHeapProfile turns heap profile sampling back on.
func enableHeapProfile() { runtime.MemProfileRate = defaultMemProfileRate }
