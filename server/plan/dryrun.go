package plan

import (
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// DryRun plans next on st as Make does, but goes on past every rejection
// to list them all, and describes the plan in resp (describePlan),
// with the layout change the allocator then asks for (Place, given the
// leader's adoptable). It returns the rejections, in the order a real
// update meets them. mask hides what a field change must not show
// (sealed secrets); nil shows the values as they are. It changes
// nothing.
func DryRun(resp *grapnelpb.PlanResponse, r *render.Renderer, lim state.Limits, adm Admission, st *state.Store, next state.State, tags map[string]map[string]string, g Guard, adoptable map[string][]string, mask func(string) string) []error {
	c := &checks{all: true}
	pd := planSteps(c, r, lim, adm, st, next, tags, ConnectedIn(st))
	if pd == nil {
		return c.errs
	}
	if pd.Changed {
		// The command's size, as the leader checks it before proposing.
		_, err := EncodeChecked(lim, &fsm.UpdateDesiredStateRequest{Update: pd.Update, Seq: st.DesiredSeq + 1})
		c.failed(err)
	}
	c.failed(CheckLocks(st.Locks, pd.Plan, g))
	if pd.Changed && len(c.errs) == 0 {
		pd.placed = placeAfter(st, pd.Plan, adoptable)
	}
	describePlan(resp, st, next, pd)
	if mask != nil {
		for _, w := range resp.Workloads {
			for _, f := range w.Fields {
				f.Old, f.New = mask(f.Old), mask(f.New)
			}
		}
	}
	return c.errs
}

// placeAfter is the layout change the allocator asks for once p is made
// on st, as the leader runs it on the store the update produces; nil if
// there is nothing placed, before or after.
func placeAfter(st *state.Store, p *Plan, adoptable map[string][]string) *Placed {
	if !HasPlacement(st) && !placesAny(p) {
		return nil
	}
	after := st.ForPlanning()
	after.ApplyDesired(&p.Update, st.Revision+1)
	pl := Place(after, adoptable)
	if pl.Update.Layout == nil {
		return nil
	}
	return &pl
}

// placesAny reports whether p renders a placed workload.
func placesAny(p *Plan) bool {
	for _, r := range p.Update.PutRendered {
		if r.Instance.AgentName == "" && placement.IsPlaced(r.Workload) {
			return true
		}
	}
	return false
}

// EncodeChecked encodes cmd and refuses it over lim.MaxUpdateBytes: Raft
// would store, send and apply it on every replica.
func EncodeChecked(lim state.Limits, cmd fsm.Command) ([]byte, error) {
	buf, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	if max := lim.MaxUpdateBytes; max > 0 && len(buf) > max {
		return nil, state.LimitError("", "update", "max_update_bytes", len(buf), max)
	}
	return buf, nil
}

// ConnectedIn reports whether an agent is in the agent map of st.
func ConnectedIn(st *state.Store) func(string) bool {
	return func(agent string) bool {
		_, ok := st.Agents[agent]
		return ok
	}
}
