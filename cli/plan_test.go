package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// fakePlan answers DryRun with plan and Apply with applied, recording
// the requests.
type fakePlan struct {
	plan    *grapnelpb.PlanResponse
	applied *grapnelpb.ApplyResponse
	dry     []*grapnelpb.PlanRequest
	apply   []*grapnelpb.ApplyRequest
}

func (f *fakePlan) DryRun(_ context.Context, in *grapnelpb.PlanRequest, _ ...grpc.CallOption) (*grapnelpb.PlanResponse, error) {
	f.dry = append(f.dry, in)
	return f.plan, nil
}

func (f *fakePlan) Revision(_ context.Context, _ *grapnelpb.RevisionRequest, _ ...grpc.CallOption) (*grapnelpb.RevisionResponse, error) {
	return &grapnelpb.RevisionResponse{Revision: f.plan.GetSeq()}, nil
}

func (f *fakePlan) Apply(_ context.Context, in *grapnelpb.ApplyRequest, _ ...grpc.CallOption) (*grapnelpb.ApplyResponse, error) {
	f.apply = append(f.apply, in)
	return f.applied, nil
}

var samplePlan = &grapnelpb.PlanResponse{
	Seq: 4, Accepted: true, Changed: true,
	Workloads: []*grapnelpb.PlannedWorkload{
		{Name: "db", Change: "updated", Agent: "agent_A", Instance: "db.bbbbbbbbbbbbbbbbbbbb.agent_A", OldInstance: "db.aaaaaaaaaaaaaaaaaaaa.agent_A",
			Causes: []string{"spec"}, Fields: []*grapnelpb.FieldChange{{Path: "runtimeConfig", Old: `"image: db:1"`, New: `"image: db:2"`}}},
	},
	Agents: []*grapnelpb.AgentPlan{{Agent: "agent_A", Steps: []*grapnelpb.PlanStep{
		{Wave: 0, Action: "delete", Workload: "db", WaitFor: []*grapnelpb.Wait{{Workload: "web", Condition: "DEL_COND_NOT_PENDING_NOR_RUNNING", Current: "Running(Ok)"}}},
		{Wave: 1, Action: "add", Workload: "db", WaitFor: []*grapnelpb.Wait{{Workload: "db", Condition: "REMOVED", InPlan: true}}},
	}}},
	Warnings: []string{"the delete of 'db' waits"},
}

// A dry-run of apply prints the plan and the command that applies it,
// and sends no update; --expect-seq sends the update through the Plan
// service with the seq.
func TestApplyDryRunAndExpectSeq(t *testing.T) {
	file := filepath.Join(t.TempDir(), "db.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nworkloads:\n  db: {agent: agent_A, runtime: podman, runtimeConfig: \"image: db:2\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn := newFakeConn()
	fp := &fakePlan{plan: samplePlan, applied: &grapnelpb.ApplyResponse{Seq: 5}}
	s, out, _ := session(conn)
	s.Plan, s.DryRun = fp, true
	if err := s.Apply(context.Background(), []string{file}, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Plan at revision 4: the update would be accepted.",
		"updated   db         agent_A   db.bbbbbbbbbbbb….agent_A   spec",
		"runtimeConfig: \"image: db:1\" -> \"image: db:2\"",
		"agent_A   0      delete   db         web neither pending nor running (now Running(Ok))",
		"agent_A   1      add      db         db old instance removed (this update)",
		"the delete of 'db' waits",
		"grapnel apply --plan-revision 4 " + file,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, out.String())
		}
	}
	if len(conn.requests) != 0 || len(fp.dry) != 1 || fp.dry[0].GetUpdate().GetUpdateMask()[0] != "desiredState.workloads.db" {
		t.Fatalf("requests %v, dry-runs %v", conn.requests, fp.dry)
	}

	s, _, _ = session(conn)
	seq := uint64(4)
	s.Plan, s.ExpectSeq, s.NoWait = fp, &seq, true
	if err := s.Apply(context.Background(), []string{file}, nil, false); err != nil {
		t.Fatal(err)
	}
	if len(conn.requests) != 0 || len(fp.apply) != 1 || fp.apply[0].GetExpectedSeq() != 4 {
		t.Fatalf("requests %v, applies %v", conn.requests, fp.apply)
	}
}

// A rejected plan lists its reasons, offers no command and fails; as
// YAML it is data.
func TestDryRunRejectedAsYAML(t *testing.T) {
	conn := newFakeConn()
	fp := &fakePlan{plan: &grapnelpb.PlanResponse{Seq: 2, Rejections: []*grapnelpb.Rejection{
		{Field: "desiredState.workloads.a.dependencies", Message: "desiredState.workloads.a.dependencies: workload dependency 'a' is part of a cycle."},
		{Field: "desiredState.workloads.x.runtime", Message: "desiredState.workloads.x.runtime: runtime must not be empty"},
	}}}
	s, out, errOut := session(conn)
	s.Plan, s.DryRun, s.PlanOutput = fp, true, PlanYAML
	s.planHint = planRevisionHint("apply", "f.yaml")
	err := s.dryRun(context.Background(), nil, []string{"desiredState"})
	if !errors.Is(err, ErrRejectedPlan) || !strings.Contains(err.Error(), "2 reason(s)") {
		t.Fatalf("err %v", err)
	}
	want := "revision: 2\naccepted: false\nchanged: false\nrejections:\n  - field: desiredState.workloads.a.dependencies\n"
	if !strings.HasPrefix(out.String(), want) || strings.Contains(out.String()+errOut.String(), "--plan-revision") {
		t.Fatalf("yaml:\n%s\nstderr: %s", out.String(), errOut.String())
	}
	s.PlanOutput = PlanTable
	out.Reset()
	_ = s.dryRun(context.Background(), nil, nil)
	if !strings.Contains(out.String(), "REJECTED") || !strings.Contains(out.String(), "  - desiredState.workloads.x.runtime: runtime must not be empty") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// Requirement (issue 30, point 8, D14): delete plans too. A dry-run of
// delete workloads prints the plan and the command that applies it at
// the plan's revision, and sends no update; with ExpectSeq or
// ExpectRevision, delete workloads and delete configs go through the
// Plan service (delete configs used to send them past it, unchecked).
func TestDeleteDryRunAndExpectations(t *testing.T) {
	conn := newFakeConn()
	fp := &fakePlan{plan: samplePlan, applied: &grapnelpb.ApplyResponse{Seq: 5}}
	s, out, _ := session(conn)
	s.Plan, s.DryRun = fp, true
	if err := s.DeleteWorkloads(context.Background(), []string{"db"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "grapnel delete workloads --plan-revision 4 db") || len(conn.requests) != 0 ||
		len(fp.dry) != 1 || fp.dry[0].GetUpdate().GetUpdateMask()[0] != "desiredState.workloads.db" {
		t.Fatalf("plan:\n%s\nrequests %v, dry-runs %v", out.String(), conn.requests, fp.dry)
	}
	s, _, _ = session(conn)
	s.Plan, s.DryRun = fp, true
	if err := s.DeleteConfigs(context.Background(), []string{"cfg"}); err != nil || len(fp.dry) != 2 || len(conn.requests) != 0 {
		t.Fatalf("delete configs --dry-run: %v, dry-runs %v, requests %v", err, fp.dry, conn.requests)
	}

	rev := uint64(3)
	s, _, _ = session(conn)
	s.Plan, s.ExpectRevision, s.NoWait = fp, &rev, true
	if err := s.DeleteWorkloads(context.Background(), []string{"db"}); err != nil {
		t.Fatal(err)
	}
	s, _, _ = session(conn)
	s.Plan, s.ExpectSeq = fp, &rev
	if err := s.DeleteConfigs(context.Background(), []string{"cfg"}); err != nil {
		t.Fatal(err)
	}
	if len(conn.requests) != 0 || len(fp.apply) != 2 || fp.apply[0].GetExpectedRevision() != 3 ||
		fp.apply[1].ExpectedRevision != nil || fp.apply[1].GetExpectedSeq() != 3 ||
		fp.apply[1].GetUpdate().GetUpdateMask()[0] != "desiredState.configs.cfg" {
		t.Fatalf("requests %v, applies %v", conn.requests, fp.apply)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"a.yaml": "a.yaml", "my file.yaml": "'my file.yaml'", "it's": `'it'\''s'`, "": "''", "-": "-"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// The dry-run against a real server: the plan is printed and nothing is
// committed; the plan's command applies it; once the state has moved on,
// the same seq is refused.
func TestDryRunEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, out := e2eSession(t, addr)
	s.Plan = s.Conn.(*client.Conn).Plan()
	ctx := context.Background()
	startAgentConnected(t, s, addr, "agent_A")

	file := filepath.Join(t.TempDir(), "app.yaml")
	write := func(y string) {
		if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`apiVersion: v1
workloads:
  db: {agent: agent_A, runtime: podman, runtimeConfig: "image: db"}
  web: {agent: agent_A, runtime: podman, runtimeConfig: "image: web", dependencies: {db: ADD_COND_RUNNING}}
`)
	s.DryRun = true
	if err := s.Apply(ctx, []string{file}, nil, false); err != nil {
		t.Fatalf("dry-run: %v\n%s", err, out.String())
	}
	plan := out.String()
	for _, want := range []string{"the update would be accepted", "added    db", "added    web",
		"agent_A   0      add      db", "agent_A   1      add      web        db running (this update)"} {
		if !strings.Contains(plan, want) {
			t.Fatalf("the plan lacks %q:\n%s", want, plan)
		}
	}
	m := regexp.MustCompile(`grapnel apply --plan-revision (\d+) `).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("no command to apply the plan:\n%s", plan)
	}
	cs, err := s.CompleteState(ctx, []string{"desiredState.workloads"})
	if err != nil || node(cs, "desiredState", "workloads", "db") != nil {
		t.Fatalf("the dry-run committed: %v %v", cs, err)
	}

	seq, _ := strconv.ParseUint(m[1], 10, 64)
	s.DryRun, s.ExpectSeq = false, &seq
	out.Reset()
	if err := s.Apply(ctx, []string{file}, nil, false); err != nil {
		t.Fatalf("apply --expect-seq %d: %v\n%s", seq, err, out.String())
	}
	if !strings.Contains(out.String(), "Running(Ok)") {
		t.Fatalf("apply at the plan's seq did not wait for the workloads:\n%s", out.String())
	}

	write("apiVersion: v1\nworkloads:\n  db: {agent: agent_A, runtime: podman, runtimeConfig: \"image: db:2\"}\n")
	err = s.Apply(ctx, []string{file}, nil, false)
	if !errors.Is(err, errs.ErrStateChanged) || !strings.Contains(err.Error(), "made at revision "+m[1]) {
		t.Fatalf("apply at a stale seq: %v", err)
	}

	// set state --dry-run -o yaml of an update with two cycles and a
	// nameless runtime: every reason, as data; nothing changes.
	write(`desiredState:
  apiVersion: v1
  workloads:
    a: {agent: agent_A, runtime: podman, runtimeConfig: x, dependencies: {b: ADD_COND_RUNNING}}
    b: {agent: agent_A, runtime: podman, runtimeConfig: x, dependencies: {a: ADD_COND_RUNNING}}
    c: {agent: agent_A, runtime: podman, runtimeConfig: x, dependencies: {c: ADD_COND_RUNNING}}
    d: {agent: agent_A, runtime: "", runtimeConfig: x}
`)
	s.ExpectSeq, s.DryRun, s.PlanOutput = nil, true, PlanYAML
	out.Reset()
	masks := []string{"desiredState.workloads.a", "desiredState.workloads.b", "desiredState.workloads.c", "desiredState.workloads.d"}
	if err := s.SetState(ctx, masks, file); !errors.Is(err, ErrRejectedPlan) {
		t.Fatalf("set state --dry-run of a rejected update: %v", err)
	}
	for _, want := range []string{"accepted: false", "field: desiredState.workloads.d.runtime",
		"field: desiredState.workloads.a.dependencies", "field: desiredState.workloads.c.dependencies"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the plan lacks %q:\n%s", want, out.String())
		}
	}
	cs, err = s.CompleteState(ctx, []string{"desiredState.workloads"})
	if err != nil || node(cs, "desiredState", "workloads", "a") != nil {
		t.Fatalf("a rejected dry-run changed the state: %v %v", cs, err)
	}
}
