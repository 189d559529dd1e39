package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/errs"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// planService answers Grapnel's Plan service: dry-runs of updates and
// updates made only if the desired state is unchanged. Both are posted
// to the leader loop, which plans an update itself and has a dry-run
// planned off the loop (leader.startDryRun); a follower forwards them.
type planService struct {
	grapnelpb.UnimplementedPlanServer
	s *Server
}

// RegisterPlan adds Grapnel's Plan service to a gRPC server. It is
// authorized as the Ankaios streams and the Cluster service are: by the
// server's TLS configuration, which admits only clients with a
// certificate of the cluster's CA.
func (s *Server) RegisterPlan(g grpc.ServiceRegistrar) {
	grapnelpb.RegisterPlanServer(g, &planService{s: s})
}

// DryRun answers the plan of an update without committing anything.
func (p *planService) DryRun(ctx context.Context, req *grapnelpb.PlanRequest) (*grapnelpb.PlanResponse, error) {
	if req.GetUpdate() == nil {
		return nil, fmt.Errorf("%w: update: the update to plan is missing", state.ErrInvalid)
	}
	var fwd *grapnelpb.PlanResponse
	c := &planCall{update: req.GetUpdate(), owner: p.s.lockOwner(ctx), adm: p.s.callAdmission(ctx)}
	a, err := p.onLeaderAdmitted(ctx, c, p.s.admitDryRun, func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
		fwd, err = grapnelpb.NewPlanClient(cc).DryRun(ctx, req)
		return err
	})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return a.plan, nil
}

// Apply makes an update if the desired state is still at the expected
// sequence number.
func (p *planService) Apply(ctx context.Context, req *grapnelpb.ApplyRequest) (*grapnelpb.ApplyResponse, error) {
	if req.GetUpdate() == nil {
		return nil, fmt.Errorf("%w: update: the update to apply is missing", state.ErrInvalid)
	}
	var fwd *grapnelpb.ApplyResponse
	owner := p.s.lockOwner(ctx)
	c := &planCall{update: req.GetUpdate(), apply: true, expectSeq: req.GetExpectedSeq(), owner: owner, requester: planRequester(owner), adm: p.s.callAdmission(ctx)}
	if req.ExpectedRevision != nil {
		rev := req.GetExpectedRevision()
		c.expectRevision = &rev
	}
	a, err := p.onLeader(ctx, c,
		func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
			fwd, err = grapnelpb.NewPlanClient(cc).Apply(ctx, req)
			return err
		})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return a.applied, nil
}

// Revision answers the desired state's revision on the leader.
func (p *planService) Revision(ctx context.Context, req *grapnelpb.RevisionRequest) (*grapnelpb.RevisionResponse, error) {
	var fwd *grapnelpb.RevisionResponse
	a, err := p.onLeader(ctx, &planCall{revision: true}, func(ctx context.Context, cc grpc.ClientConnInterface) (err error) {
		fwd, err = grapnelpb.NewPlanClient(cc).Revision(ctx, req)
		return err
	})
	if fwd != nil || err != nil {
		return fwd, err
	}
	return a.revision, nil
}

// onLeader runs a call on the leader loop of this replica and waits for
// its answer, holding while no leader is known. A replica that does not
// lead tells a leader-aware client where the leader is, and forwards the
// call of any other (forward) unless another replica forwarded it here.
func (p *planService) onLeader(ctx context.Context, c *planCall, forward func(context.Context, grpc.ClientConnInterface) error) (planAnswer, error) {
	return p.onLeaderAdmitted(ctx, c, nil, forward)
}

// onLeaderAdmitted is onLeader for a call that needs a place on the
// leader first: admit, when set, is asked for one on the replica that
// runs the call (not on one that forwards it), and what it returns
// frees the place (planCall.release).
func (p *planService) onLeaderAdmitted(ctx context.Context, c *planCall, admit func(context.Context) (func(), error), forward func(context.Context, grpc.ClientConnInterface) error) (planAnswer, error) {
	s := p.s
	d, err := s.findLeader(ctx)
	if err != nil {
		return planAnswer{}, err
	}
	if d.t == nil {
		return planAnswer{}, p.elsewhere(ctx, d, forward)
	}
	if admit != nil {
		if c.release, err = admit(ctx); err != nil {
			return planAnswer{}, err
		}
	}
	// A call the loop never takes leaves its place to the next.
	giveUp := func() {
		if c.release != nil && c.abandon() {
			c.release()
		}
	}
	c.reply = make(chan planAnswer, 1)
	if !d.t.post(c) {
		giveUp()
		return planAnswer{}, fmt.Errorf("%w: %s leads no more; call again", errs.ErrLeaderChanged, s.node.ID())
	}
	select {
	case a := <-c.reply:
		return a, a.err
	case <-d.t.stop:
		// The answer of a call still queued is dropped with the term.
		giveUp()
		return planAnswer{}, fmt.Errorf("%w: %s leads no more; call again", errs.ErrLeaderChanged, s.node.ID())
	case <-ctx.Done():
		giveUp()
		return planAnswer{}, ctx.Err()
	}
}

// elsewhere answers a call this replica cannot serve because the leader
// d is another replica, as elsewhere does for a stream.
func (p *planService) elsewhere(ctx context.Context, d destination, forward func(context.Context, grpc.ClientConnInterface) error) error {
	s := p.s
	if err := s.notProxied(ctx, "call", d); err != nil {
		return err
	}
	cc, err := s.leaderConn(d)
	if err != nil {
		return err
	}
	return forward(s.outgoing(ctx), cc)
}
