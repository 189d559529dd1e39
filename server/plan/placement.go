package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/internal/errs"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/state"
)

// Placed is what the allocator makes of a store (docs/placement.md): the
// layout change it asks for, as the Placement entry the leader proposes
// carries it, with the instances that entry adds and deletes, and what
// it could not satisfy.
type Placed struct {
	Update  state.PlacementUpdate // Layout nil: the layout holds
	Added   []state.Rendered
	Deleted []Deletion
	// Unsatisfied is what the allocation could not satisfy; BadTags the
	// agents whose capacity tag does not parse (they keep what they host
	// and get nothing new).
	Unsatisfied []placement.Unsatisfied
	BadTags     []error
}

// Place runs the allocator on st, as the leader does after every entry
// that changes its inputs. adoptable is, per placed workload, the agents
// back from beyond their grace that may still run its instance (the
// leader's memory; nil in a test or when none are).
func Place(st *state.Store, adoptable map[string][]string) Placed {
	in, bad := placementInput(st)
	in.Adoptable = adoptable
	res := placement.Allocate(in)
	p := Placed{Unsatisfied: res.Unsatisfied, BadTags: bad}
	p.Update, p.Added, p.Deleted = placementChange(st, res.Layout)
	return p
}

// placementInput builds the allocator's input from a store. An agent
// whose capacity tag does not parse keeps what it hosts and gets nothing
// new; bad lists those agents' errors, which name the tag.
func placementInput(st *state.Store) (in placement.Input, bad []error) {
	in.Pinned = map[string]int{}
	hosted := map[string]int{}
	for _, n := range state.SortedKeys(st.Rendered) {
		r := st.Rendered[n]
		if a := r.Instance.AgentName; a != "" {
			in.Pinned[a]++
			continue
		}
		req, ok, err := placement.RequestOf(n, r.Workload)
		if err != nil || !ok {
			continue // refused when it was applied; never here
		}
		in.Requests = append(in.Requests, req)
		for _, a := range st.Placement[n] {
			hosted[a]++
		}
	}
	in.Current = placement.Layout(st.Placement)
	names := map[string]bool{}
	for a := range st.Agents {
		names[a] = true
	}
	for a := range st.Modes {
		names[a] = true
	}
	for _, n := range state.SortedKeys(names) {
		ag := placement.Agent{Name: n, Mode: st.AgentMode(n), Capacity: placement.Unlimited}
		var tags map[string]string
		if a, ok := st.Agents[n]; ok {
			ag.Present, tags = true, a.Tags
		}
		var err error
		ag.RiskGroup, ag.Capacity, err = placement.AgentTags(n, tags)
		if err != nil {
			bad = append(bad, err)
			ag.Capacity = in.Pinned[n] + hosted[n]
		}
		in.Agents = append(in.Agents, ag)
	}
	return in, bad
}

// HasPlacement reports whether the store holds anything to place or
// placed: without, the allocator has nothing to do. A store whose every
// rendering names an agent (no bytes rendered for none) is answered
// without a walk over the renderings.
func HasPlacement(st *state.Store) bool {
	if len(st.Placement) > 0 {
		return true
	}
	if st.AgentBytes("") == 0 {
		return false
	}
	for _, r := range st.Rendered {
		if r.Instance.AgentName == "" && placement.IsPlaced(r.Workload) {
			return true
		}
	}
	return false
}

// placementChange is what a new layout changes, with the states the
// server sets: Pending(Initial) for each new instance, and the removal
// of each instance on an agent that is gone (nobody would report it).
// deleted lists the instances moved off, those the server removes
// itself marked.
func placementChange(st *state.Store, next placement.Layout) (u state.PlacementUpdate, added []state.Rendered, deleted []Deletion) {
	changes := placement.Diff(placement.Layout(st.Placement), next)
	if len(changes) == 0 {
		return u, nil, nil
	}
	u.Layout = map[string][]string{}
	for _, c := range changes {
		u.Layout[c.Workload] = slices.Clone(next[c.Workload])
		r := st.Rendered[c.Workload]
		for _, a := range c.Added {
			ra := r.OnAgent(a)
			added = append(added, ra)
			u.SetStates = append(u.SetStates, state.WorkloadState{Instance: ra.Instance, State: state.PendingInitial})
		}
		if !placement.IsPlaced(r.Workload) {
			// No longer placed (deleted, pinned, unscheduled): the update
			// that made it so deleted its instances already.
			continue
		}
		for _, a := range c.Removed {
			in := r.Instance
			in.AgentName = a
			_, present := st.Agents[a]
			if _, known := st.States.Get(in); !present && known {
				u.DeleteStates = append(u.DeleteStates, in)
			}
			deleted = append(deleted, Deletion{Instance: in, ServerHandled: !present})
		}
	}
	return u, added, deleted
}

// DrainLoss is MAMID's rule for a drain: disabling an agent must not
// leave a placed workload with fewer instances than it has now. The
// allocator moves each instance off a Disabled agent to another eligible
// agent with room; DrainLoss runs it as if agent were Disabled and
// refuses, naming the workloads and their counts, when one would keep
// fewer instances (no eligible agent has room for it). nil when nothing
// is lost. It changes nothing.
func DrainLoss(st *state.Store, agent string, adoptable map[string][]string) error {
	if !HasPlacement(st) {
		return nil
	}
	in, _ := placementInput(st)
	found := false
	for i := range in.Agents {
		if in.Agents[i].Name == agent {
			in.Agents[i].Mode, found = state.ModeDisabled, true
		}
	}
	if !found {
		return nil // not an agent the allocator knows: it hosts nothing
	}
	in.Adoptable = placement.Layout(adoptable)
	next := placement.Allocate(in).Layout
	var lost []string
	for _, w := range state.SortedKeys(st.Placement) {
		if have, keep := len(st.Placement[w]), len(next[w]); keep < have {
			lost = append(lost, fmt.Sprintf("%s would keep %d of its %d instances", w, keep, have))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%w: agent %s is not disabled: workload %s, as no other eligible agent (connected and Active) has room "+
		"for them (an agent hosts at most one instance of a workload, and no more than its grapnel.io/capacity). "+
		"Add an agent or raise a capacity and disable it again, or disable it with --force to remove those instances",
		errs.ErrAvailability, agent, strings.Join(lost, ", workload "))
}
