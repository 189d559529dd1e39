package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// spinner frames of the live wait table.
var spinnerFrames = []string{"|", "/", "-", "\\"}

// WaitList tracks the instances an update added or deleted until each has
// reached a final state, and keeps the rows shown while waiting.
type WaitList struct {
	added   map[string]bool // instance names still waited for
	deleted map[string]bool
	rows    map[string]WorkloadRow
}

// NewWaitList starts tracking. Instances on agents that are not connected
// are shown but not waited for: nobody would report their state.
func NewWaitList(added, deleted []state.InstanceName, connected []string) *WaitList {
	up := make(map[string]bool, len(connected))
	for _, a := range connected {
		up[a] = true
	}
	w := &WaitList{added: map[string]bool{}, deleted: map[string]bool{}, rows: map[string]WorkloadRow{}}
	track := func(ns []state.InstanceName, set map[string]bool) {
		for _, n := range ns {
			w.rows[n.String()] = WorkloadRow{Instance: n}
			if up[n.AgentName] {
				set[n.String()] = true
			}
		}
	}
	track(added, w.added)
	track(deleted, w.deleted)
	return w
}

// Seed fills the rows from the complete state read before the update (the
// deleted instances are only there) and the one read after it, and counts
// the states already in the later one. A deleted instance missing from the
// later state is gone already: the server drops an instance's entry when
// it is removed.
func (w *WaitList) Seed(before, after state.Tree) {
	for _, t := range []state.Tree{before, after} {
		for _, r := range WorkloadRows(t) {
			if _, ok := w.rows[r.key()]; ok && r.Instance.ID != "" {
				w.rows[r.key()] = r
			}
		}
	}
	w.Update(workloadStates(after))
	present := map[string]bool{}
	for _, ws := range workloadStates(after) {
		present[ws.Instance.String()] = true
	}
	for k := range w.deleted {
		if !present[k] {
			delete(w.deleted, k)
			r := w.rows[k]
			r.State = state.Removed
			w.rows[k] = r
		}
	}
}

// finalAfterAdd reports whether an added instance has settled.
// swdd~cli-checks-for-final-workload-state~3
func finalAfterAdd(e state.ExecutionState) bool {
	switch e.State {
	case state.StateRunning, state.StateSucceeded, state.StateFailed, state.StateNotScheduled, state.StateAgentDisconnected:
		return true
	case state.StatePending:
		return e.SubState == state.SubStartingFailed
	}
	return false
}

// finalAfterDelete reports whether a deleted instance has settled.
func finalAfterDelete(e state.ExecutionState) bool {
	return e.State == state.StateRemoved || e.State == state.StateAgentDisconnected
}

// Update records states and returns the tracked rows whose state changed.
func (w *WaitList) Update(ws []state.WorkloadState) []WorkloadRow {
	var changed []WorkloadRow
	for _, s := range ws {
		k := s.Instance.String()
		r, ok := w.rows[k]
		if !ok {
			continue
		}
		if r.State != s.State {
			r.State = s.State
			w.rows[k] = r
			changed = append(changed, r)
		}
		if finalAfterAdd(s.State) {
			delete(w.added, k)
		}
		if finalAfterDelete(s.State) {
			delete(w.deleted, k)
		}
	}
	return changed
}

// Done reports whether nothing is waited for any more.
func (w *WaitList) Done() bool { return len(w.added) == 0 && len(w.deleted) == 0 }

// Waiting reports whether the instance is still waited for.
func (w *WaitList) Waiting(n state.InstanceName) bool {
	return w.added[n.String()] || w.deleted[n.String()]
}

// Rows returns the tracked rows in table order.
func (w *WaitList) Rows() []WorkloadRow {
	rows := make([]WorkloadRow, 0, len(w.rows))
	for _, r := range w.rows {
		rows = append(rows, r)
	}
	sortRows(rows)
	return rows
}

// Table is the live wait table: the execution state of every row still
// waited for is led by the spinner frame, as ank shows it.
func (w *WaitList) Table(spinner string) Table {
	h := append([]string(nil), workloadHeaders...)
	h[colExecutionState] = "  " + h[colExecutionState]
	t := Table{Headers: h}
	for _, r := range w.Rows() {
		mark := " "
		if w.Waiting(r.Instance) {
			mark = spinner
		}
		c := r.cells()
		c[colExecutionState] = mark + " " + c[colExecutionState]
		t.Rows = append(t.Rows, c)
	}
	return t
}

// ProgressLine is the plain-text report of one state change, printed
// instead of a redrawn table when stdout is not a terminal.
func ProgressLine(r WorkloadRow) string {
	return fmt.Sprintf("%s on %s: %s", r.Instance.WorkloadName, r.Instance.AgentName, r.State)
}

// ParseUpdateSuccess reads the instance names of an UpdateStateSuccess.
func ParseUpdateSuccess(u *ankbase.UpdateStateSuccess) (added, deleted []state.InstanceName, err error) {
	parse := func(ss []string) ([]state.InstanceName, error) {
		out := make([]state.InstanceName, 0, len(ss))
		for _, s := range ss {
			n, err := state.ParseInstanceName(s)
			if err != nil {
				return nil, fmt.Errorf("server sent a malformed update result: %w", err)
			}
			out = append(out, n)
		}
		return out, nil
	}
	if added, err = parse(u.GetAddedWorkloads()); err != nil {
		return nil, nil, err
	}
	if deleted, err = parse(u.GetDeletedWorkloads()); err != nil {
		return nil, nil, err
	}
	return added, deleted, nil
}

// updateAndWait sends an update and, unless NoWait, waits until every
// instance it added or deleted has settled, showing their states.
// swdd~cli-requests-update-state-with-watch~2
// swdd~cli-requests-update-state-with-watch-success~1
//
// With DryRun it prints the plan of the update instead; with ExpectSeq
// the update is made only if the desired state is still at that seq.
func (s *Session) updateAndWait(ctx context.Context, newState *ankbase.CompleteState, masks []string) error {
	if s.DryRun {
		return s.dryRun(ctx, newState, masks)
	}
	if s.NoWait {
		_, err := s.sendUpdate(ctx, newState, masks)
		return err
	}
	// Listen before the update, so no state report is missed; read the
	// state before it, because deleted instances vanish from it.
	updates := s.Conn.WorkloadStates()
	before, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	succ, err := s.sendUpdate(ctx, newState, masks)
	if err != nil {
		return err
	}
	added, deleted, err := ParseUpdateSuccess(succ)
	if err != nil {
		return err
	}
	s.debugf("update added %d and deleted %d instance(s)", len(added), len(deleted))
	if len(added) == 0 && len(deleted) == 0 {
		s.infof("Apply successful. No workloads updated.")
		return nil
	}
	s.infof("Successfully applied the manifest(s).\nWaiting for workload(s) to reach desired states (press Ctrl+C to interrupt).\n")
	after, err := s.CompleteState(ctx, nil)
	if err != nil {
		return err
	}
	wl := NewWaitList(added, deleted, connectedAgents(after))
	wl.Seed(before, after)
	return s.wait(ctx, wl, updates)
}

// wait runs the live table until wl is done.
func (s *Session) wait(ctx context.Context, wl *WaitList, updates <-chan []*ankbase.WorkloadState) error {
	live := s.Terminal && !s.Quiet
	scr := &screen{w: s.Out, terminal: true, width: s.Width}
	frame := 0
	draw := func() {
		scr.show(wl.Table(spinnerFrames[frame%len(spinnerFrames)]).Render(s.Width, FitTruncate, colAdditionalInfo))
	}
	var tick <-chan time.Time
	if live {
		t := clock.NewTicker(s.clock(), s.tick())
		defer t.Stop()
		tick = t.C
		draw()
	} else if !s.Quiet {
		fmt.Fprintln(s.Out, WorkloadTable(wl.Rows()).Render(0, FitNone, 0))
	}
	for !wl.Done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			frame++
			draw()
		case ws, ok := <-updates:
			if !ok {
				return s.connErr()
			}
			states, err := rpc.WorkloadStatesFromProto(ws)
			if err != nil {
				s.debugf("ignoring a workload-state broadcast: %v", err)
				continue
			}
			changed := wl.Update(states)
			switch {
			case live:
				draw()
			case !s.Quiet:
				for _, r := range changed {
					fmt.Fprintln(s.Out, ProgressLine(r))
				}
			}
		}
	}
	if live {
		draw()
	}
	return nil
}
