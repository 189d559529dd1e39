package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
)

// The leader's part of placement (docs/placement.md; what the allocator
// is given and what its layout changes are the planner's, plan.Place,
// so that a dry-run shows them too). The allocator runs
// on the speculative store whenever an entry that changes its inputs is
// proposed (an update, an agent connected or gone past its grace, a
// mode) — never on a timer — and its answer, if it differs from the
// layout in force, is proposed as a PlacementType entry. Allocating is
// idempotent, so a leader that runs it again on the same inputs proposes
// nothing: at idle nothing is written.

// notePlacementInput marks the allocator's inputs changed by a command
// about to be proposed, with why.
func (l *leader) notePlacementInput(cmd fsm.Command) {
	var why string
	switch c := cmd.(type) {
	case *fsm.UpdateDesiredStateRequest:
		why = "desired state updated"
	case *fsm.AgentConnectedRequest:
		why = "agent " + c.Name + " connected"
	case *fsm.AgentGoneRequest:
		why = "agent " + c.Name + " gone"
	case *fsm.SetAgentModeRequest:
		why = "agent " + c.Agent + " set to " + c.Mode.String()
	default:
		return
	}
	l.notePlacement(why)
}

// notePlacement marks the allocator's inputs changed, with why. A new
// leader notes it when it loads the store (rebuild): a previous leader
// may have stopped between an update and its layout.
func (l *leader) notePlacement(why string) {
	if !slices.Contains(l.placeWhy, why) {
		l.placeWhy = append(l.placeWhy, why)
	}
}

// allocate runs the allocator on the speculative store if its inputs
// changed since it last ran, and proposes the new layout if it differs
// from the one in force. Once committed, the agents that get an instance
// receive it and those that lose one delete it, with the delete
// conditions of its dependents. A layout of many instances goes in
// several entries (splitPlacement), one per step, so that no step
// projects and dispatches more than one of them: the entries still to
// propose stay valid while the allocator's inputs do not change (each
// entry places whole workloads), and are dropped for a new layout when
// they do. The hellos of the agents whose arrival this run took in go out
// once its last entry has settled (awaitLayout).
func (l *leader) allocate() {
	if l.projected.stale() || l.pipe.full() {
		return
	}
	if len(l.placeWhy) > 0 {
		l.placeParts, l.placeReason = l.layout(), strings.Join(l.placeWhy, "; ")
		l.placeWhy = nil
		l.helloAfter = append(l.helloAfter, l.helloWait...)
		l.helloWait = nil
	}
	if len(l.placeParts) > 0 {
		p := l.placeParts[0]
		l.placeParts[0] = placementPart{}
		l.placeParts = l.placeParts[1:]
		l.proposePlacement(p, l.placeReason)
	}
	if len(l.placeParts) == 0 && len(l.helloAfter) > 0 {
		for _, c := range l.helloAfter {
			l.pipe.ordered(func() { l.greet(c) })
		}
		l.helloAfter = nil
	}
}

// awaitLayout holds an arriving agent's ServerHello until the layout its
// arrival leads to is committed: the allocator runs in this step on the
// store its AgentConnected entry makes, and the hello, read from the
// committed store after that run's entries, lists the placed instances
// the agent gets. Sent at once, it would list none of those, and the
// agent would delete the ones it still runs as left over, then create
// them again when the layout's entry reached it. An entry that changes
// no input of the allocator (it was refused) greets the agent in turn.
func (l *leader) awaitLayout(c *conn) {
	if len(l.placeWhy) == 0 {
		l.pipe.ordered(func() { l.greet(c) })
		return
	}
	l.helloWait = append(l.helloWait, c)
}

// dropWaitingHellos closes the streams whose hello waits (a restore
// resynchronises every agent).
func (l *leader) dropWaitingHellos() {
	for _, c := range append(l.helloWait, l.helloAfter...) {
		c.close()
	}
	l.helloWait, l.helloAfter = nil, nil
}

// adoptable is, per placed workload, the agents back from beyond their
// grace that may still run its instance as rendered now: the layout took
// it off them while they were gone (leader.left).
func (l *leader) adoptable(st *state.Store) map[string][]string {
	var out map[string][]string
	for _, a := range state.SortedKeys(l.left) {
		if _, back := st.Agents[a]; !back {
			continue
		}
		for w, in := range l.left[a] {
			r, ok := st.Rendered[w]
			if !ok || r.Instance.AgentName != "" || r.OnAgent(a).Instance != in {
				continue // deleted, pinned or changed since: nothing to adopt
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[w] = append(out[w], a)
		}
	}
	return out
}

// noteLeft remembers the instances a layout change takes off agents that
// are gone: they may still run them when they come back.
func (l *leader) noteLeft(deleted []plan.Deletion) {
	for _, d := range deleted {
		if !d.ServerHandled {
			continue
		}
		a := d.Instance.AgentName
		if l.left[a] == nil {
			l.left[a] = map[string]state.InstanceName{}
		}
		l.left[a][d.Instance.WorkloadName] = d.Instance
	}
}

// layout runs the allocator and returns the entries of the layout change
// it asks for, none if the layout holds.
func (l *leader) layout() []placementPart {
	st := l.projected.store
	if !plan.HasPlacement(st) {
		l.setUnsatisfied(nil)
		return nil
	}
	pl := plan.Place(st, l.adoptable(st))
	for _, err := range pl.BadTags {
		l.s.log.Warn("agent tag ignored: the agent keeps what it hosts and gets no new placed workload", "error", err)
	}
	l.setUnsatisfied(pl.Unsatisfied)
	u, added, deleted := pl.Update, pl.Added, pl.Deleted
	if u.Layout == nil {
		return nil
	}
	parts := splitPlacement(u, added, deleted, placementChangesPerEntry(l.s.limits))
	l.s.log.Info("placing workloads", "why", strings.Join(l.placeWhy, "; "), "changes", len(u.Layout), "entries", len(parts),
		"unsatisfied", len(pl.Unsatisfied))
	return parts
}

// proposePlacement proposes one entry of a new layout and, once it is
// committed, tells the agents and the event subscribers.
func (l *leader) proposePlacement(p placementPart, why string) {
	u := p.update
	meta := l.historyMeta("", nil, false)
	meta.Decision = why
	prop := l.project(&fsm.PlacementRequest{Update: u, History: meta})
	if prop.err != nil {
		l.submit(prop, nil, nil) // logs the refusal
		return
	}
	d := planDispatch(l.s, l.projected.store, &plan.Plan{Added: p.added, Deleted: p.deleted})
	// Events: the new instances' states are added, those the server
	// removed are removed, as for an update.
	evStates := slices.Clone(u.SetStates)
	fresh := make([]state.InstanceName, len(u.SetStates))
	for i, ws := range u.SetStates {
		fresh[i] = ws.Instance
	}
	for _, in := range u.DeleteStates {
		evStates = append(evStates, state.WorkloadState{Instance: in, State: state.Removed})
	}
	l.noteLeft(p.deleted)
	l.submit(prop, func(_ any, index uint64) {
		l.sendDispatch(d, index)
		if len(evStates) > 0 && l.events.HasSubscribers() {
			for _, ev := range stateEvents(evStates, fresh) {
				l.emit(ev.diff, statesTree(ev.states))
			}
		}
	}, nil)
}

// placementPart is the part of a layout change one entry carries: whole
// workloads, with their instances to add and to delete.
type placementPart struct {
	update  state.PlacementUpdate
	added   []state.Rendered
	deleted []plan.Deletion
}

// placementChangesPerEntry is how many instances one Placement entry adds
// or removes at most: a layout of many instances (1,000 placed workloads
// of 64, on enough agents) encodes to more than max_update_bytes and was
// refused whole, so that none of it was placed, and it was computed again
// and refused again at every later change of the allocator's inputs.
// 512 bytes an instance is far above what one costs with names of a
// usual length.
func placementChangesPerEntry(lim state.Limits) int {
	if lim.MaxUpdateBytes <= 0 {
		return 4096
	}
	return min(max(lim.MaxUpdateBytes/512, 16), 4096)
}

// splitPlacement cuts a layout change into parts of whole workloads, in
// name order, of at most limit instance changes each (a workload with
// more goes alone). Each part is a consistent layout change of its own: a
// workload's instances never span two entries.
func splitPlacement(u state.PlacementUpdate, added []state.Rendered, deleted []plan.Deletion, limit int) []placementPart {
	byWorkload := map[string]*placementPart{}
	get := func(w string) *placementPart {
		p := byWorkload[w]
		if p == nil {
			p = &placementPart{update: state.PlacementUpdate{Layout: map[string][]string{}}}
			byWorkload[w] = p
		}
		return p
	}
	for w, agents := range u.Layout {
		get(w).update.Layout[w] = agents
	}
	for _, s := range u.SetStates {
		p := get(s.Instance.WorkloadName)
		p.update.SetStates = append(p.update.SetStates, s)
	}
	for _, in := range u.DeleteStates {
		p := get(in.WorkloadName)
		p.update.DeleteStates = append(p.update.DeleteStates, in)
	}
	for _, a := range added {
		p := get(a.Instance.WorkloadName)
		p.added = append(p.added, a)
	}
	for _, d := range deleted {
		p := get(d.Instance.WorkloadName)
		p.deleted = append(p.deleted, d)
	}
	var (
		out []placementPart
		cur *placementPart
		n   int
	)
	for _, w := range state.SortedKeys(byWorkload) {
		p := byWorkload[w]
		k := len(p.added) + len(p.deleted)
		if cur != nil && n+k > limit {
			out = append(out, *cur)
			cur, n = nil, 0
		}
		if cur == nil {
			cur = &placementPart{update: state.PlacementUpdate{Layout: map[string][]string{}}}
		}
		maps.Copy(cur.update.Layout, p.update.Layout)
		cur.update.SetStates = append(cur.update.SetStates, p.update.SetStates...)
		cur.update.DeleteStates = append(cur.update.DeleteStates, p.update.DeleteStates...)
		cur.added = append(cur.added, p.added...)
		cur.deleted = append(cur.deleted, p.deleted...)
		n += k
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// Unsatisfied is what the last allocation could not satisfy, for the
// problems view (docs/placement.md); nil on a replica that does not lead.
func (s *Server) Unsatisfied() []placement.Unsatisfied {
	s.leaderMu.Lock()
	t := s.term
	s.leaderMu.Unlock()
	if t == nil {
		return nil
	}
	t.unsatMu.Lock()
	defer t.unsatMu.Unlock()
	return slices.Clone(t.unsatisfied)
}

// setUnsatisfied keeps the last allocation's unsatisfied workloads; the
// problems view reads them (problemFacts), so a change makes the leader
// detect again: the list lives in the leader's memory, not in the store.
func (l *leader) setUnsatisfied(u []placement.Unsatisfied) {
	if !slices.Equal(l.term.unsatisfiedNow(), u) {
		l.markProblemsDirty()
	}
	l.term.setUnsatisfied(u)
}

// unsatisfiedNow is the last allocation's unsatisfied workloads.
func (t *term) unsatisfiedNow() []placement.Unsatisfied {
	t.unsatMu.Lock()
	defer t.unsatMu.Unlock()
	return t.unsatisfied
}

// setUnsatisfied keeps the last allocation's unsatisfied workloads for
// readers outside the leader loop.
func (t *term) setUnsatisfied(u []placement.Unsatisfied) {
	t.unsatMu.Lock()
	t.unsatisfied = u
	t.unsatMu.Unlock()
}

// modeCall is an operator's mode for an agent, handed to the leader loop
// (Cluster.SetAgentMode); done gets the outcome once committed.
type modeCall struct {
	agent     string
	mode      state.AgentMode
	requester string
	// force drains although instances would be lost (plan.DrainLoss).
	force bool
	done  chan error // capacity 1
}

// setAgentMode hands a mode to the leader loop and waits for its commit.
func (s *Server) setAgentMode(ctx context.Context, agent string, mode state.AgentMode, requester string, force bool) error {
	call := &modeCall{agent: agent, mode: mode, requester: requester, force: force, done: make(chan error, 1)}
	return s.callLeaderLoop(ctx, call, call.done)
}

// setAgentMode proposes a mode unless the agent already has it; the
// allocator runs after it (notePlacementInput), so a Disabled agent is
// drained and an activated one may host again. A Disabled that would
// leave a placed workload with fewer instances is refused unless forced
// (plan.DrainLoss).
func (l *leader) setAgentMode(m *modeCall) {
	if !l.projected.store.KnowsAgent(m.agent) {
		err := fmt.Errorf("%w: agent %q: the cluster knows no agent of that name (none is connected, has reported, has a mode or is named by a workload or a layout); check the spelling (grapnel get agents)", errs.ErrUnknownAgent, m.agent)
		l.pipe.ordered(func() { m.done <- err })
		return
	}
	if l.projected.store.AgentMode(m.agent) == m.mode {
		l.pipe.ordered(func() { m.done <- nil })
		return
	}
	if m.mode == state.ModeDisabled && !m.force {
		if err := plan.DrainLoss(l.projected.store, m.agent, l.adoptable(l.projected.store)); err != nil {
			l.pipe.ordered(func() { m.done <- err })
			return
		}
	}
	l.propose(&fsm.SetAgentModeRequest{Agent: m.agent, Mode: m.mode, History: l.historyMeta(m.requester, nil, false)},
		func(any, uint64) { m.done <- nil }, func(err error) { m.done <- err })
}
