package workload

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultResyncInterval is the period of the drift repair the agent's
// command line sets. A round lists every runtime once: a directory read
// for the process runtime, one `podman ps --all` (about 40 ms of CPU) for
// podman, shared with the state polls when podman workloads run. Every
// 5 min that is about 0.013 % of a core, a small share of an idle
// agent's 0.05–0.10 %; the instances the agent watches are checked more
// often than that anyway (pidfd exits, the 30 s backstop, podman's
// 500 ms polls), so what the round alone finds (an unknown container with
// the agent's labels) may wait that long.
const DefaultResyncInterval = 5 * time.Minute

// Drift reasons, the additionalInfo of the state a repair reports; the
// server's records show them as they are (docs/agent.md, "Drift
// repair"). Every one starts with DriftPrefix.
const (
	// DriftPrefix starts the additionalInfo of every state a drift
	// repair reports; the server records such a report as a repair.
	DriftPrefix = state.DriftPrefix
	// driftRemovedWhat and driftReplacedWhat say what happened to an
	// instance the agent runs, driftUnknownWhat what the agent found.
	driftRemovedWhat  = "removed behind the agent's back"
	driftReplacedWhat = "replaced behind the agent's back by %s"
	driftUnknownWhat  = "unknown instance with the agent's labels (%s)"
)

// driftKind is what a resync found wrong with one instance.
type driftKind int

const (
	// driftRemoved: an instance a loop watches is gone from its runtime.
	driftRemoved driftKind = iota + 1
	// driftReplaced: it is gone, and another instance of its runtime
	// carries its instance name.
	driftReplaced
	// driftUnknown: the runtime runs an instance for this agent that no
	// loop stands for.
	driftUnknown
)

func (k driftKind) String() string {
	switch k {
	case driftRemoved:
		return "removed"
	case driftReplaced:
		return "replaced"
	case driftUnknown:
		return "unknown"
	}
	return "none"
}

// held is what one loop holds of the host, for the comparison.
type held struct {
	inst state.InstanceName
	rt   string     // runtime name; "" when the loop has no runtime
	id   runtime.ID // "" while the instance is being created or is gone
	// watching: the loop watches a created instance, so the instance
	// should be on the host.
	watching bool
}

// drift is one difference between the loops and the host.
type drift struct {
	kind driftKind
	inst state.InstanceName
	rt   string
	// id is the loop's instance (removed, replaced) or the one found
	// (unknown).
	id runtime.ID
	// by is the instance that carries the name of a replaced one.
	by runtime.ID
}

// compareHost is the comparison of a resync: what the loops hold against
// what the runtimes listed (listed names the runtimes whose List
// answered; the others are left alone). It is level-triggered: it looks
// only at the two sides as they are now, so a round that finds nothing
// wrong finds nothing, and one after a repair finds what is still wrong.
//
//   - a watching loop whose instance is not listed: removed, or replaced
//     when another listed instance of its runtime carries its name;
//   - a listed instance no loop holds: unknown, unless a loop of that
//     instance name holds none yet (it is being created, or was just
//     deleted and its loop ends), which a later round decides.
//
// The result is sorted, so that repairs happen and are logged in a fixed
// order.
func compareHost(loops []held, found []hostInstance, listed map[string]bool) []drift {
	type key struct {
		rt string
		id runtime.ID
	}
	type named struct {
		rt   string
		inst state.InstanceName
	}
	onHost := map[key]bool{}
	byName := map[named][]runtime.ID{}
	for _, f := range found {
		onHost[key{f.rtName, f.ID}] = true
		byName[named{f.rtName, f.Instance}] = append(byName[named{f.rtName, f.Instance}], f.ID)
	}
	holds := map[key]bool{}
	inFlight := map[state.InstanceName]bool{}
	for _, h := range loops {
		if h.id == "" {
			inFlight[h.inst] = true
			continue
		}
		holds[key{h.rt, h.id}] = true
	}
	var out []drift
	for _, h := range loops {
		if !h.watching || h.id == "" || !listed[h.rt] || onHost[key{h.rt, h.id}] {
			continue
		}
		d := drift{kind: driftRemoved, inst: h.inst, rt: h.rt, id: h.id}
		if others := byName[named{h.rt, h.inst}]; len(others) > 0 {
			d.kind, d.by = driftReplaced, others[0]
		}
		out = append(out, d)
	}
	for _, f := range found {
		if holds[key{f.rtName, f.ID}] || inFlight[f.Instance] {
			continue
		}
		out = append(out, drift{kind: driftUnknown, inst: f.Instance, rt: f.rtName, id: f.ID})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.inst != b.inst {
			return a.inst.String() < b.inst.String()
		}
		return a.id < b.id
	})
	return out
}

// Resync asks for a drift repair round now (`grapnel agent resync`); it
// returns at once and the round runs on the resync goroutine. A request
// while a round runs asks for one more after it.
func (m *Manager) Resync() {
	select {
	case m.resyncKick <- struct{}{}:
	default:
	}
}

// runResync is the resync goroutine: a round every Config.ResyncInterval
// (none when it is 0) and one on every Resync. It ends with Close.
func (m *Manager) runResync() {
	defer m.wg.Done()
	fired := make(chan struct{}, 1)
	for {
		var t clock.Timer
		if m.cfg.ResyncInterval > 0 {
			t = m.clock.AfterFunc(m.cfg.ResyncInterval, func() {
				select {
				case fired <- struct{}{}:
				default:
				}
			})
		}
		select {
		case <-fired:
		case <-m.resyncKick:
		case <-m.ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-fired: // a round is about to run: it covers this firing
		default:
		}
		m.resync(m.ctx)
	}
}

// resync runs one drift repair round: it lists what every runtime runs
// for this agent, compares it with what the loops hold (compareHost) and
// repairs the difference, then makes every watching loop read its
// instance's state at once:
//   - removed or replaced: the loop is told, so that the Failed(Lost) it
//     reads names the drift, and its restart policy decides whether the
//     instance is created again (loop.watch);
//   - unknown: the instance is deleted, and Removed reported with the
//     reason;
//   - nothing: nothing is reported, and a loop whose state did not change
//     reports nothing either, so an agent without drift sends nothing and
//     the replicas write nothing.
//
// Nothing happens before the first ServerHello: until the server said
// what this agent runs, every instance on the host would look unknown.
func (m *Manager) resync(ctx context.Context) {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	ready := m.greeted && !m.closed
	m.mu.Unlock()
	if !ready {
		return
	}
	found, listed := m.listHostFor(ctx)
	if ctx.Err() != nil {
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	rtNames := make(map[runtime.Runtime]string, len(m.cfg.Runtimes))
	for name, rt := range m.cfg.Runtimes {
		rtNames[rt] = name
	}
	byHeld := make(map[*loop]held, len(m.all))
	loops := make([]held, 0, len(m.all))
	for l := range m.all {
		h := held{inst: l.inst, rt: rtNames[l.rt], id: l.id, watching: l.watching}
		byHeld[l] = h
		loops = append(loops, h)
	}
	rtByName := m.cfg.Runtimes
	drifts := compareHost(loops, found, listed)
	m.log.Debug("resync round", "listed", len(found), "drifts", len(drifts))
	for _, d := range drifts {
		switch d.kind {
		case driftRemoved, driftReplaced:
			for l, h := range byHeld {
				// A drift already noted was logged by the round that
				// found it (an instance left Failed by NEVER stays so).
				if h.inst == d.inst && h.rt == d.rt && h.id == d.id && l.watching && l.drift != d {
					l.drift = d
					m.log.Warn("drift: an instance the agent runs is gone", "instance", d.inst.String(),
						"runtime", d.rt, "id", string(d.id), "drift", d.kind.String(), "by", string(d.by))
				}
			}
		case driftUnknown:
			m.log.Warn("drift: removing an unknown instance with the agent's labels", "instance", d.inst.String(),
				"runtime", d.rt, "id", string(d.id))
			l := m.newLoop(d.inst, nil)
			l.rt, l.id, l.silent = rtByName[d.rt], d.id, true
			l.removedInfo = unknownInfo(d)
			// A replacement shares its run directory with the loop of
			// the instance it replaced, which keeps it.
			for o := range byHeld {
				l.keepRunDir = l.keepRunDir || o.inst == d.inst
			}
			l.requestDeleteLocked(nil)
			m.startLocked(l)
		}
	}
	m.fireBackstopLocked()
}

// listHostFor is listHost for a resync; listed names the runtimes whose
// List answered, so that a runtime that cannot say now is not taken for
// one that runs nothing.
func (m *Manager) listHostFor(ctx context.Context) ([]hostInstance, map[string]bool) {
	listed := map[string]bool{}
	var out []hostInstance
	for _, name := range m.runtimeNames() {
		rt := m.cfg.Runtimes[name]
		list, err := rt.List(ctx, m.cfg.Agent)
		if err != nil {
			m.log.Warn("resync: listing workloads failed; the runtime is left out of this round", "runtime", name, "error", err)
			continue
		}
		listed[name] = true
		for _, f := range list {
			out = append(out, hostInstance{rtName: name, rt: rt, Found: f})
		}
	}
	return out, listed
}

// runtimeNames are the configured runtimes' names, sorted.
func (m *Manager) runtimeNames() []string {
	names := make([]string, 0, len(m.cfg.Runtimes))
	for name := range m.cfg.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// fireBackstopLocked ends the wait for the next backstop round now: every
// loop that waits on a watch reads its instance's state.
func (m *Manager) fireBackstopLocked() {
	if m.tick == nil {
		return
	}
	if m.tickTimer != nil {
		m.tickTimer.Stop()
	}
	close(m.tick)
	m.tick, m.tickTimer = nil, nil
}

// Drift reasons read:
//
//	drift: <what>[ (<runtime's detail>)]; repair: <repair>
//
// driftWhat is the part before "; repair"; detail is what the runtime
// said of the instance, if anything.
func driftWhat(d drift, detail string) string {
	var what string
	switch d.kind {
	case driftReplaced:
		what = fmt.Sprintf(driftReplacedWhat, shortID(d.by))
	case driftUnknown:
		what = fmt.Sprintf(driftUnknownWhat, d.rt+" "+shortID(d.id))
	default:
		what = driftRemovedWhat
	}
	if detail != "" {
		what += " (" + detail + ")"
	}
	return DriftPrefix + what
}

// unknownInfo is the additionalInfo of the Removed reported for an
// unknown instance the resync deleted.
func unknownInfo(d drift) string { return driftWhat(d, "") + "; repair: removed by resync" }

// lostInfo is the additionalInfo of the Failed(Lost) a loop reports for
// its instance gone behind the agent's back, with the repair its restart
// policy makes.
func lostInfo(d drift, detail string, policy state.RestartPolicy, restart bool) string {
	if restart {
		return driftWhat(d, detail) + "; repair: restart (restartPolicy " + string(policy) + ")"
	}
	return driftWhat(d, detail) + "; repair: none (restartPolicy " + string(policy) + ")"
}

// shortID is a container id as podman shows it (12 characters); the
// process runtime's IDs, instance names, are kept whole.
func shortID(id runtime.ID) string {
	s := string(id)
	if len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" {
		return s[:12]
	}
	return s
}
