package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// planClient is a Plan client on a plain connection to addr.
func planClient(t testing.TB, addr string) grapnelpb.PlanClient {
	return grapnelpb.NewPlanClient(dialRaw(t, addr))
}

// oneWorkload is an update that sets workload name on agent_A.
func oneWorkload(t *testing.T, name, image string) *ankbase.UpdateStateRequest {
	t.Helper()
	cs, err := rpc.CompleteStateFromTree(manifest(t, "apiVersion: v1\nworkloads:\n  "+name+":\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: "+image+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState.workloads." + name}}
}

func fsmIndex(ts *testServer) (seq, index uint64) {
	ts.fsm.Read(func(s *state.Store, i uint64) { seq, index = s.DesiredSeq, i })
	return seq, index
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A dry-run answers the plan and commits nothing: the FSM's index and
// the desired state stay as they were. Applying it at its seq works
// once; after that, the same seq is refused, naming both numbers.
func TestPlanServiceDryRunAndApplyAtSeq(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb))
	ts.agent("agent_A", nil)
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)
	seq0, index0 := fsmIndex(ts)

	plan, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.GetAccepted() || !plan.GetChanged() || plan.GetSeq() != seq0 {
		t.Fatalf("plan: accepted %v changed %v seq %d (store at %d): %v", plan.GetAccepted(), plan.GetChanged(), plan.GetSeq(), seq0, plan.GetRejections())
	}
	if w := plan.GetWorkloads(); len(w) != 1 || w[0].GetName() != "cache" || w[0].GetChange() != "added" || !strings.HasPrefix(w[0].GetInstance(), "cache.") {
		t.Fatalf("planned workloads %v", w)
	}
	if seq, index := fsmIndex(ts); seq != seq0 || index != index0 {
		t.Fatalf("the dry-run committed: seq %d index %d, were %d and %d", seq, index, seq0, index0)
	}

	applied, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis"), ExpectedSeq: plan.GetSeq()})
	if err != nil {
		t.Fatal(err)
	}
	if applied.GetSeq() != seq0+1 || len(applied.GetAddedWorkloads()) != 1 || applied.GetAddedWorkloads()[0] != plan.GetWorkloads()[0].GetInstance() {
		t.Fatalf("applied %v, planned instance %s", applied, plan.GetWorkloads()[0].GetInstance())
	}
	if seq, _ := fsmIndex(ts); seq != seq0+1 {
		t.Fatalf("store at seq %d after the apply, want %d", seq, seq0+1)
	}

	// The state moved on: the plan's seq is refused.
	_, err = pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis:7"), ExpectedSeq: plan.GetSeq()})
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(rpc.FromStatus(err), errs.ErrStateChanged) {
		t.Fatalf("a stale seq: %v", err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, fmt.Sprintf("made at revision %d, the desired state is at revision %d", seq0, seq0+1)) {
		t.Fatalf("the refusal names no seqs: %s", msg)
	}
	if seq, _ := fsmIndex(ts); seq != seq0+1 {
		t.Fatalf("the refused apply changed the store: seq %d", seq)
	}

	// A rejected update: the dry-run lists why; Apply refuses it.
	bad := oneWorkload(t, "cache", "redis")
	bad.NewState.DesiredState.Workloads.Workloads["cache"].Runtime = ptr("")
	plan, err = pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: bad})
	if err != nil || plan.GetAccepted() || len(plan.GetRejections()) != 1 {
		t.Fatalf("dry-run of a bad update: %v %v", plan, err)
	}
	_, err = pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: bad, ExpectedSeq: plan.GetSeq()})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), plan.GetRejections()[0].GetMessage()) {
		t.Fatalf("apply of a bad update: %v, the dry-run said %q", err, plan.GetRejections()[0].GetMessage())
	}

	if _, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a dry-run without an update: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A follower forwards a plain client's call to the leader, and tells a
// leader-aware client where the leader is.
func TestPlanServiceOnFollower(t *testing.T) {
	rs := startReplicaSet(t, 3, 5*time.Second)
	f := rs.follower()
	pc := planClient(t, f.addr)
	ctx := callCtx(t)
	plan, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
	if err != nil || !plan.GetAccepted() {
		t.Fatalf("forwarded dry-run: %v %v", plan, err)
	}
	applied, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis"), ExpectedSeq: plan.GetSeq()})
	if err != nil || applied.GetSeq() != plan.GetSeq()+1 {
		t.Fatalf("forwarded apply: %v %v", applied, err)
	}
	_, err = pc.DryRun(wire.WithLeaderAware(ctx), &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
	var nl *errs.NotLeaderError
	if !errors.As(rpc.FromStatus(err), &nl) || nl.LeaderAddress != rs.leader().addr {
		t.Fatalf("leader-aware call on a follower: %v", err)
	}

	// The leader-aware client, given only the follower, gets there.
	r, err := client.NewResolver(client.Options{Addrs: []string{f.addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	plan, err = r.Plan().DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis:7")})
	if err != nil || !plan.GetAccepted() || plan.GetSeq() != applied.GetSeq() {
		t.Fatalf("dry-run through the client: %v %v", plan, err)
	}
	if _, err := r.Plan().Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis:7"), ExpectedSeq: plan.GetSeq() - 1}); !errors.Is(err, errs.ErrStateChanged) {
		t.Fatalf("apply at an old seq through the client: %v", err)
	}
}

// The seq check on the projected state is backed by the FSM's: an entry
// the leader did not plan (proposed behind its back) moves the committed
// desired state on while the projected one still shows the old seq, and
// the update at that seq is refused by the FSM, as a changed state.
func TestPlanServiceApplyRefusedByTheFSM(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb))
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)
	seq, _ := fsmIndex(ts)
	buf, err := fsm.Encode(&fsm.UpdateDesiredStateRequest{Seq: seq + 1, Update: state.DesiredUpdate{PutConfigs: map[string]any{"foreign": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.node.Apply(buf, 5e9); err != nil {
		t.Fatal(err)
	}
	_, err = pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis"), ExpectedSeq: seq})
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(rpc.FromStatus(err), errs.ErrStateChanged) ||
		!strings.Contains(status.Convert(err).Message(), fsm.ErrOutOfSequence.Error()) {
		t.Fatalf("apply at the seq the leader still projected: %v", err)
	}
	// Rebuilt from the FSM, the leader plans at the new seq.
	plan, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
	if err != nil || plan.GetSeq() != seq+1 {
		t.Fatalf("dry-run after the rebuild: seq %d, %v", plan.GetSeq(), err)
	}
}
