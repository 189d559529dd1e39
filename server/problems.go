package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/state"
)

// The leader's part of the problems view (docs/problems.md). After an
// event of the loop, once the pipeline is empty (the committed store is
// then what the leader planned on), it runs the detector if the store or
// the facts it reads changed since the last run: a new FSM index, another
// set of agent streams or graces, or the wake-up the last run asked for.
// It compares the findings with the store's open problems and proposes
// one ProblemsChanged entry when they differ. Nothing runs, writes or
// wakes while nothing changes.

// DefaultAgentConnectGrace is how long an agent that has workloads
// assigned and has never connected may take to connect before it is a
// problem. It is longer than the reconnect grace: at a power-on the other
// units' agents start with their hosts, and a problem raised and cleared
// at every boot would be a false alarm and two writes.
const DefaultAgentConnectGrace = 30 * time.Second

// connectGrace is the configured connect grace: the default when zero,
// none when negative.
func (s *Server) connectGrace() time.Duration {
	switch g := s.cfg.AgentConnectGrace; {
	case g < 0:
		return 0
	case g == 0:
		return DefaultAgentConnectGrace
	default:
		return g
	}
}

// maxProblemChanges bounds the problems one entry opens and closes, so
// that it stays far below the update budget; the rest follow in the next
// entry, since its commit makes the leader detect again.
const maxProblemChanges = 50

// problemWatch is the leader memory of the problems view. It is owned by
// the leader loop.
type problemWatch struct {
	// applied and facts are what the last detection read: the FSM index
	// and a signature of the agents' streams and graces.
	applied uint64
	facts   string
	ran     bool
	// woke is set when the timer the last detection asked for fired.
	woke bool
	// awaited is when this leader first saw each never-connected agent
	// that has workloads assigned: it gets the connect grace from then
	// before it is a problem, as a known agent gets the reconnect grace
	// after a failover.
	awaited map[string]time.Time
	timer   clock.Timer
	timerAt time.Time
	wake    chan struct{}
	// cache keeps what the detector derives from the desired state
	// alone until it changes.
	cache problems.Cache
}

func newProblemWatch() problemWatch {
	return problemWatch{awaited: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// problemWoke is the loop's reaction to the detection's timer.
func (l *leader) problemWoke() {
	l.problems.timer = nil
	l.markProblemsDirty()
}

// stopProblemTimer stops the wake-up at the end of the term.
func (l *leader) stopProblemTimer() {
	if l.problems.timer != nil {
		l.problems.timer.Stop()
		l.problems.timer = nil
	}
}

// factsSignature names the agents with a stream and in a grace, the
// replicas whose storage failed or that hold their votes, and the agents
// whose run folder failed: the leader's facts the detector reads besides
// the store.
func (l *leader) factsSignature() string {
	var b strings.Builder
	for _, a := range state.SortedKeys(l.greeted) {
		if l.greeted[a].conn != nil {
			b.WriteString(a)
			b.WriteByte(',')
		}
	}
	b.WriteByte('|')
	for _, a := range state.SortedKeys(l.grace) {
		b.WriteString(a)
		b.WriteByte(',')
	}
	b.WriteByte('|')
	for _, m := range []map[string]string{l.s.node.StorageFaults(), l.s.node.VoteHolds(), l.agentStorage} {
		for _, id := range state.SortedKeys(m) {
			b.WriteString(id)
			b.WriteByte('=')
			b.WriteString(m[id])
			b.WriteByte(',')
		}
		b.WriteByte('|')
	}
	l.replicas.signature(&b)
	return b.String()
}

// detectProblems runs the detector when its inputs changed and proposes
// the problems that opened and closed.
func (l *leader) detectProblems() {
	w := &l.problems
	if l.projected.stale() || !l.pipe.empty() {
		return
	}
	applied := l.s.fsm.AppliedIndex()
	sig := l.factsSignature()
	if w.ran && !w.woke && applied == w.applied && sig == w.facts {
		return
	}
	w.ran, w.woke, w.applied, w.facts = true, false, applied, sig
	now := l.clock.Now()
	restores := l.s.fsm.Restores()
	var (
		opened, updated []problems.Finding
		closed          []uint64
		wakeAt          time.Time
	)
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		facts, graceEnd := l.problemFacts(st, now, w.cache.Assigned(st, restores))
		res := problems.DetectCached(st, facts, &w.cache, restores)
		opened, closed = problems.Diff(st.Problems, res.Findings)
		if st.ProblemUpdates() {
			updated = problems.Changed(st.Problems, res.Findings)
		}
		wakeAt = graceEnd
		if res.WakeAtMs != 0 {
			if t := time.UnixMilli(res.WakeAtMs); wakeAt.IsZero() || t.Before(wakeAt) {
				wakeAt = t
			}
		}
	})
	l.armProblemTimer(now, wakeAt)
	if len(opened)+len(closed)+len(updated) == 0 {
		return
	}
	if len(closed) > maxProblemChanges {
		closed = closed[:maxProblemChanges]
	}
	if len(opened) > maxProblemChanges-len(closed) {
		opened = opened[:maxProblemChanges-len(closed)]
	}
	if len(updated) > maxProblemChanges-len(closed)-len(opened) {
		updated = updated[:maxProblemChanges-len(closed)-len(opened)]
	}
	cmd := &fsm.ProblemsChangedRequest{TimeMs: now.UnixMilli(), Closed: closed}
	for _, f := range opened {
		cmd.Opened = append(cmd.Opened, problemOf(f))
	}
	for _, f := range updated {
		cmd.Updated = append(cmd.Updated, problemOf(f))
	}
	l.propose(cmd, func(resp any, _ uint64) {
		r, _ := resp.(*fsm.ProblemsChangedResponse)
		if r != nil {
			l.problemsChanged(r)
		}
	}, func(err error) {
		// Nothing changed in the store: detect again at the next step,
		// unless the entry was refused for its size, which the same
		// detection would repeat at every step.
		if !errors.Is(err, state.ErrInvalid) {
			l.markProblemsDirty()
		}
	})
}

// problemOf is a finding as the entry records it.
func problemOf(f problems.Finding) state.Problem {
	return state.Problem{Kind: string(f.Kind), Key: f.Key, Objects: f.Objects, Summary: f.Summary, Detail: f.Detail}
}

// markProblemsDirty makes the next step detect again although neither
// the store nor the agent facts changed: for an entry that failed, and
// for an input of the detector that lives in the leader's memory only
// (docs/problems.md, "Extension points").
func (l *leader) markProblemsDirty() { l.problems.woke = true }

// problemFacts is what the detector needs of the leader's memory, and
// the end of the earliest grace it gave a never-connected agent (zero if
// none runs). It reads st under the FSM's read lock; assigned is the
// workloads assigned to each agent.
func (l *leader) problemFacts(st *state.Store, now time.Time, assigned map[string][]string) (problems.Facts, time.Time) {
	f := problems.Facts{NowMs: now.UnixMilli(), Connected: map[string]bool{}, InGrace: map[string]bool{}}
	for a, g := range l.greeted {
		if g.conn != nil {
			f.Connected[a] = true
		}
	}
	for a := range l.grace {
		f.InGrace[a] = true
	}
	// The replicas whose storage failed, from gossip (the leader loop
	// wakes when they change: StorageFaultChanges).
	if faults := l.s.node.StorageFaults(); len(faults) > 0 {
		f.StorageFailed = faults
	}
	if holds := l.s.node.VoteHolds(); len(holds) > 0 {
		f.VoteHeld = holds
	}
	// The agents whose run folder failed, from their hellos and load
	// reports (memory only; factsSignature covers them).
	if len(l.agentStorage) > 0 {
		f.AgentStorageFailed = maps.Clone(l.agentStorage)
	}
	// The placement allocator's shortfalls (kept by the leader loop,
	// which marks the problems dirty when they change) and the agents in
	// Maintenance (replicated), docs/placement.md.
	for _, u := range l.term.unsatisfiedNow() {
		sf := problems.Shortfall{Workload: u.Workload, Wanted: u.Wanted, Placed: u.Placed, Reason: problems.ShortCapacity}
		switch u.Reason {
		case placement.ReasonSpreadImpossible:
			sf.Reason = problems.ShortSpread
			sf.Detail = "All its instances are placed, but some share a risk group: no agent in another risk group has room."
		case placement.ReasonNoEligibleAgent:
			sf.Reason = problems.ShortEligible
			sf.Detail = notEligible(st)
		default:
			sf.Detail = "The agents that take new instances are at their capacity (grapnel.io/capacity)."
		}
		f.Shortfalls = append(f.Shortfalls, sf)
	}
	for a, m := range st.Modes {
		switch m {
		case state.ModeMaintenance:
			if f.Maintenance == nil {
				f.Maintenance = map[string]bool{}
			}
			f.Maintenance[a] = true
		case state.ModeDisabled:
			if f.Disabled == nil {
				f.Disabled = map[string]bool{}
			}
			f.Disabled[a] = true
		}
	}
	graceEnd := l.replicaFacts(&f, now)
	grace := l.s.connectGrace()
	awaited := map[string]time.Time{}
	for a := range assigned {
		if _, ok := st.Agents[a]; ok || f.Connected[a] || f.InGrace[a] || problems.Seen(st, a) {
			continue
		}
		since, ok := l.problems.awaited[a]
		if !ok {
			since = now
		}
		awaited[a] = since
		if end := since.Add(grace); now.Before(end) {
			f.InGrace[a] = true
			graceEnd = earliest(graceEnd, end)
		}
	}
	l.problems.awaited = awaited
	return f, graceEnd
}

// earliest is the earlier of two times, a zero one not counted.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// notEligible says which known agents take no new instances and why, for
// a shortage of eligible agents: an agent in Maintenance keeps what it
// hosts but takes nothing new, a Disabled one hosts nothing, one away
// past its grace is not in the agent map.
func notEligible(st *state.Store) string {
	var maint, disabled []string
	for _, a := range state.SortedKeys(st.Modes) {
		switch st.Modes[a] {
		case state.ModeMaintenance:
			maint = append(maint, a)
		case state.ModeDisabled:
			disabled = append(disabled, a)
		}
	}
	var parts []string
	if len(maint) > 0 {
		parts = append(parts, "in Maintenance: "+strings.Join(maint, ", "))
	}
	if len(disabled) > 0 {
		parts = append(parts, "Disabled: "+strings.Join(disabled, ", "))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("Only %d agent(s) are connected and Active.", activeAgents(st))
	}
	return fmt.Sprintf("Only %d agent(s) are connected and Active; these take no new instances (%s).", activeAgents(st), strings.Join(parts, "; "))
}

// activeAgents counts the agents in the agent map in mode Active.
func activeAgents(st *state.Store) int {
	n := 0
	for a := range st.Agents {
		if st.AgentMode(a) == state.ModeActive {
			n++
		}
	}
	return n
}

// armProblemTimer keeps one timer for the earliest time the detection
// asked to run again; none when it asked for none.
func (l *leader) armProblemTimer(now, at time.Time) {
	w := &l.problems
	if w.timer != nil && at.Equal(w.timerAt) {
		return
	}
	l.stopProblemTimer()
	if at.IsZero() {
		return
	}
	w.timerAt = at
	stop, wake := l.term.stop, w.wake
	w.timer = l.clock.AfterFunc(max(at.Sub(now), time.Millisecond), func() {
		select {
		case wake <- struct{}{}:
		case <-stop:
		}
	})
}

// problemsChanged tells the log and the subscribers of problems which
// problems a committed entry opened and closed.
func (l *leader) problemsChanged(r *fsm.ProblemsChangedResponse) {
	var diff state.StateDiff
	for _, p := range r.Closed {
		l.s.log.Info("problem resolved", "id", p.ID, "kind", p.Kind, "summary", p.Summary)
		diff.Removed = append(diff.Removed, problemPath(p.ID))
	}
	for _, p := range r.Opened {
		l.s.log.Warn("problem", "id", p.ID, "kind", p.Kind, "summary", p.Summary)
		diff.Added = append(diff.Added, problemPath(p.ID))
	}
	for _, p := range r.Updated {
		l.s.log.Info("problem updated", "id", p.ID, "kind", p.Kind, "summary", p.Summary)
		diff.Updated = append(diff.Updated, problemPath(p.ID))
	}
	if !l.events.HasSubscribers() {
		return
	}
	slices.Sort(diff.Added)
	slices.Sort(diff.Removed)
	slices.Sort(diff.Updated)
	for _, ev := range l.events.ExplicitEvents(problemsRoot, diff, state.Tree{}) {
		cs, err := rpc.CompleteStateFromTree(ev.State)
		if err != nil {
			continue
		}
		l.respond(ev.RequestID, &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{
			CompleteStateResponse: &ankbase.CompleteStateResponse{
				CompleteState: cs,
				AlteredFields: &ankbase.AlteredFields{AddedFields: ev.Added, UpdatedFields: ev.Updated, RemovedFields: ev.Removed},
			}}})
	}
}

// problemsRoot is the field-mask root of problem events: `grapnel get
// events problems` subscribes to them.
const problemsRoot = "problems"

// problemPath is the altered-field path of a problem in events.
func problemPath(id uint64) string { return problemsRoot + "." + strconv.FormatUint(id, 10) }

// problemCounts counts this replica's open problems by kind, every kind
// present, for the grapnel_problems gauge.
// clusterCounts is what grapnel_agents_connected and grapnel_workloads
// read at a scrape: the connected agents and the instances by execution
// state, from this replica's store.
func (s *Server) clusterCounts() (agents int, byState map[string]int) {
	byState = map[string]int{}
	s.fsm.Read(func(st *state.Store, _ uint64) {
		agents = len(st.Agents)
		for _, byWl := range st.States {
			for _, byID := range byWl {
				for _, e := range byID {
					byState[string(e.State)]++
				}
			}
		}
	})
	return agents, byState
}

func (s *Server) problemCounts() map[string]int {
	out := make(map[string]int, len(problems.Kinds))
	for _, k := range problems.Kinds {
		out[string(k)] = 0
	}
	s.fsm.Read(func(st *state.Store, _ uint64) {
		for _, p := range st.Problems.Open {
			out[p.Kind]++
		}
	})
	return out
}
