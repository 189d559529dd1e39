package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// planLeader is the leader memory a dry-run reads: the renderer, the
// limits and the projected store.
func planLeader(st *state.Store, lim state.Limits) *leader {
	return &leader{s: &Server{renderer: render.New(), limits: lim}, projected: &projected{store: st}, clock: clock.Real()}
}

// storeOf is a store holding the manifest y, applied as an update, with
// the given agents connected.
func storeOf(t testing.TB, y string, agents ...string) *state.Store {
	t.Helper()
	s, _, err := state.ParseManifest([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore()
	for _, a := range agents {
		st.AgentConnected(a, nil)
	}
	p, err := plan.Make(render.New(), state.Limits{}, plan.Admission{}, st, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyDesired(&p.Update, 1)
	return st
}

// replaceAll is an update that replaces the whole desired state with y.
func replaceAll(t testing.TB, y string) *ankbase.UpdateStateRequest {
	t.Helper()
	tr, err := state.ParseTree([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": tr})
	if err != nil {
		t.Fatal(err)
	}
	return &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState"}}
}

// stepsText writes each agent's steps as "agent: wave action workload
// [waits]" lines, in order.
func stepsText(resp *grapnelpb.PlanResponse) []string {
	var out []string
	for _, a := range resp.GetAgents() {
		for _, s := range a.GetSteps() {
			var waits []string
			for _, w := range s.GetWaitFor() {
				in := ""
				if w.GetInPlan() {
					in = "*"
				}
				waits = append(waits, w.GetWorkload()+in+" "+w.GetCondition())
			}
			line := fmt.Sprintf("%s: %d %s %s", a.GetAgent(), s.GetWave(), s.GetAction(), s.GetWorkload())
			if len(waits) > 0 {
				line += " [" + strings.Join(waits, ", ") + "]"
			}
			out = append(out, line)
		}
	}
	return out
}

const dbWeb = `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: web"
    dependencies:
      db: ADD_COND_RUNNING
`

// The order in which agents act, as a dry-run plans it: which step
// waits for which (add conditions from the dependencies, delete
// conditions from the delete graph, the old instance of an updated
// workload), and the waves that order them. "*" marks a workload waited
// for that the update changes too.
func TestDryRunPlanOrder(t *testing.T) {
	tests := []struct {
		name     string
		current  string
		next     string
		steps    []string
		changes  []string // name change [causes]
		fields   map[string][]string
		warnings []string
		running  []string // workloads reported running before the update
	}{
		{
			// swdd~server-state-stores-delete-condition~1
			// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
			name:    "deleting a dependency and its dependent: the dependent goes first",
			current: dbWeb,
			next:    "apiVersion: v1\n",
			steps: []string{
				"agent_A: 0 delete web",
				"agent_A: 1 delete db [web* DEL_COND_NOT_PENDING_NOR_RUNNING]",
			},
			changes: []string{"db deleted", "web deleted"},
		},
		{
			// A dependent that stays: the dependency's delete waits for it.
			name:    "deleting only the dependency waits for the dependent that stays",
			current: dbWeb,
			next: `apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: web"
    dependencies:
      db: ADD_COND_RUNNING
`,
			steps:   []string{"agent_A: 0 delete db [web DEL_COND_NOT_PENDING_NOR_RUNNING]"},
			changes: []string{"db deleted"},
			warnings: []string{"workload 'web' depends on 'db', which the update deletes",
				"the delete of 'db' on agent_A waits until 'web' (Pending(Initial) now) is neither pending nor running"},
		},
		{
			// The dependent's new spec drops the dependency: the delete
			// graph of the store the update produces has no condition.
			name:    "a dependent that drops the dependency imposes no delete condition",
			current: dbWeb,
			next: `apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: web2"
`,
			steps: []string{
				"agent_A: 0 delete db",
				"agent_A: 0 delete web",
				"agent_A: 1 add web [web* REMOVED]",
			},
			changes: []string{"db deleted", "web updated [spec]"},
			fields:  map[string][]string{"web": {"dependencies.db", "runtimeConfig"}},
		},
		{
			// swdd~server-detects-new-workload~1
			name:    "adding a dependency and its dependent on two agents: the add conditions order them",
			current: "apiVersion: v1\n",
			next: `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
  init:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: init"
  web:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: web"
    dependencies:
      db: ADD_COND_RUNNING
      init: ADD_COND_SUCCEEDED
`,
			steps: []string{
				"agent_A: 0 add db",
				"agent_A: 0 add init",
				"agent_B: 1 add web [db* ADD_COND_RUNNING, init* ADD_COND_SUCCEEDED]",
			},
			changes: []string{"db added", "init added", "web added"},
		},
		{
			// swdd~server-detects-changed-workload~1
			// swdd~agent-updates-deleted-and-added-workloads~1: delete
			// first, then create.
			// Ankaios holds the old instance of an updated dependency
			// until its dependents stop; the plan warns of it.
			name:    "an updated dependency: its old instance waits for the running dependent, its new one for the old one",
			running: []string{"web"},
			current: dbWeb,
			next: `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db2"
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: web"
    dependencies:
      db: ADD_COND_RUNNING
`,
			steps: []string{
				"agent_A: 0 delete db [web DEL_COND_NOT_PENDING_NOR_RUNNING]",
				"agent_A: 1 add db [db* REMOVED]",
			},
			changes:  []string{"db updated [spec]"},
			fields:   map[string][]string{"db": {"runtimeConfig"}},
			warnings: []string{"the delete of 'db' on agent_A waits until 'web' (Running(Ok) now) is neither pending nor running"},
		},
		{
			name:    "a workload moved to another agent does not wait for the old one",
			current: dbWeb,
			next: `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: db"
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: web"
    dependencies:
      db: ADD_COND_RUNNING
`,
			steps: []string{
				"agent_A: 0 delete db [web DEL_COND_NOT_PENDING_NOR_RUNNING]",
				"agent_B: 0 add db",
			},
			changes:  []string{"db updated [spec]"},
			fields:   map[string][]string{"db": {"agent"}},
			warnings: []string{"the delete of 'db' on agent_A waits until 'web' (Pending(Initial) now)"},
		},
		{
			// swdd~server-state-triggers-configuration-rendering-of-workloads~1
			// swdd~server-state-compares-rendered-workloads~1: a changed
			// config item renders its users again; one whose rendering
			// stays the same is not touched.
			name: "a templated config item changed: its users are rendered again, in dependency order",
			current: `apiVersion: v1
workloads:
  api:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: {{c.image}}"
    configs:
      c: backend
  front:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: {{c.image}}"
    configs:
      c: frontend
    dependencies:
      api: ADD_COND_RUNNING
  unused:
    runtime: podman
    agent: agent_A
    runtimeConfig: "port: {{c.port}}"
    configs:
      c: backend
configs:
  backend:
    image: api:1
    port: "80"
  frontend:
    image: front:1
`,
			next: `apiVersion: v1
workloads:
  api:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: {{c.image}}"
    configs:
      c: backend
  front:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: {{c.image}}"
    configs:
      c: frontend
    dependencies:
      api: ADD_COND_RUNNING
  unused:
    runtime: podman
    agent: agent_A
    runtimeConfig: "port: {{c.port}}"
    configs:
      c: backend
configs:
  backend:
    image: api:2
    port: "80"
  frontend:
    image: front:2
`,
			steps: []string{
				// api's old instance waits for front's to stop, its
				// new one for the old one, and front's new one for api.
				"agent_A: 1 delete api [front* DEL_COND_NOT_PENDING_NOR_RUNNING]",
				"agent_A: 2 add api [api* REMOVED]",
				"agent_B: 0 delete front",
				"agent_B: 3 add front [front* REMOVED, api* ADD_COND_RUNNING]",
			},
			changes: []string{"api updated [config 'backend']", "front updated [config 'frontend']"},
			fields:  map[string][]string{"api": {"runtimeConfig"}, "front": {"runtimeConfig"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := storeOf(t, tt.current, "agent_A", "agent_B")
			for _, n := range tt.running {
				st.States.Set(st.Rendered[n].Instance, state.RunningOk)
			}
			before := st.DesiredSeq
			resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, tt.next), "", plan.Admission{})
			if !resp.GetAccepted() {
				t.Fatalf("rejected: %v", resp.GetRejections())
			}
			if resp.GetSeq() != before {
				t.Errorf("seq %d, want %d", resp.GetSeq(), before)
			}
			if got := stepsText(resp); !slices.Equal(got, tt.steps) {
				t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.steps, "\n  "))
			}
			var changes []string
			for _, w := range resp.GetWorkloads() {
				c := w.GetName() + " " + w.GetChange()
				if len(w.GetCauses()) > 0 {
					c += " [" + strings.Join(w.GetCauses(), ", ") + "]"
				}
				changes = append(changes, c)
				if want, ok := tt.fields[w.GetName()]; ok {
					var paths []string
					for _, f := range w.GetFields() {
						paths = append(paths, f.GetPath())
					}
					if !slices.Equal(paths, want) {
						t.Errorf("%s: fields %v, want %v", w.GetName(), paths, want)
					}
				}
			}
			if !slices.Equal(changes, tt.changes) {
				t.Errorf("workloads %v, want %v", changes, tt.changes)
			}
			if len(resp.GetWarnings()) != len(tt.warnings) {
				t.Errorf("warnings %q, want %q", resp.GetWarnings(), tt.warnings)
			}
			for i, w := range tt.warnings {
				if i < len(resp.GetWarnings()) && !strings.Contains(resp.GetWarnings()[i], w) {
					t.Errorf("warning %q does not say %q", resp.GetWarnings()[i], w)
				}
			}
			if st.DesiredSeq != before {
				t.Errorf("the dry-run changed the store: seq %d, was %d", st.DesiredSeq, before)
			}
			checkDeleteConditionsAsDispatched(t, st, tt.next, resp)
		})
	}
}

// checkDeleteConditionsAsDispatched checks the delete conditions of the
// plan against those the real dispatch sends: the update applied to a
// copy of the store, then planDispatch.
func checkDeleteConditionsAsDispatched(t *testing.T, st *state.Store, next string, resp *grapnelpb.PlanResponse) {
	t.Helper()
	l := planLeader(st.Clone(), state.DefaultLimits())
	p, err := l.planUpdate(replaceAll(t, next), plan.Admission{}, plan.Guard{})
	if err != nil {
		t.Fatal(err)
	}
	after := l.projected.store
	after.ApplyDesired(&p.Update, 2)
	sent := map[string][]string{}
	for _, uw := range planDispatch(l.s, after, p).perAgent {
		for _, d := range uw.GetDeletedWorkloads() {
			var conds []string
			for _, dep := range state.SortedKeys(d.GetDependencies()) {
				conds = append(conds, dep+" "+d.GetDependencies()[dep].String())
			}
			sent[d.GetInstanceName().GetWorkloadName()] = conds
		}
	}
	for _, a := range resp.GetAgents() {
		for _, s := range a.GetSteps() {
			if s.GetAction() != plan.ActionDelete {
				continue
			}
			var conds []string
			for _, w := range s.GetWaitFor() {
				conds = append(conds, w.GetWorkload()+" "+w.GetCondition())
			}
			if !slices.Equal(conds, sent[s.GetWorkload()]) {
				t.Errorf("delete %s: planned conditions %v, dispatched %v", s.GetWorkload(), conds, sent[s.GetWorkload()])
			}
		}
	}
}

// A dry-run lists every reason the update would be rejected, each
// item's first; the first it lists is the error the real update answers,
// which stops there.
//
// swdd~server-state-triggers-validation-of-workload-fields~1
// swdd~server-state-rejects-state-with-cyclic-dependencies~1
func TestDryRunListsEveryRejection(t *testing.T) {
	st := storeOf(t, dbWeb, "agent_A")
	next := `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
  a:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: a"
    dependencies:
      b: ADD_COND_RUNNING
  b:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: b"
    dependencies:
      a: ADD_COND_RUNNING
  c:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: c"
    dependencies:
      d: ADD_COND_RUNNING
  d:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: d"
    dependencies:
      c: ADD_COND_RUNNING
  huge:
    runtime: podman
    agent: agent_A
    runtimeConfig: "` + strings.Repeat("x", 300) + `"
  norender:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: {{c.image}}"
    configs:
      c: missing
  noruntime:
    runtime: ""
    agent: agent_A
    runtimeConfig: "image: x"
`
	lim := state.DefaultLimits()
	lim.MaxWorkloadBytes = 250
	resp := planLeader(st, lim).dryRun(replaceAll(t, next), "", plan.Admission{})
	if resp.GetAccepted() {
		t.Fatal("accepted")
	}
	var got []string
	for _, r := range resp.GetRejections() {
		got = append(got, r.GetField())
	}
	want := []string{
		"desiredState.workloads.huge",               // limit
		"desiredState.workloads.noruntime.runtime",  // naming rules
		"desiredState.workloads.norender.configs.c", // render
		"desiredState.workloads.a.dependencies",     // the cycle a real update names
		"desiredState.workloads.c.dependencies",     // another cycle
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rejected fields\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// The workloads that plan still show, with what could be rendered.
	if len(resp.GetWorkloads()) == 0 {
		t.Error("a rejected dry-run lists no workloads")
	}

	// The real update stops at the first reason, with the same text.
	l := planLeader(st, lim)
	_, err := l.planUpdate(replaceAll(t, next), plan.Admission{}, plan.Guard{})
	if err == nil || err.Error() != resp.GetRejections()[0].GetMessage() {
		t.Fatalf("the real update answers %v, the dry-run's first reason is %q", err, resp.GetRejections()[0].GetMessage())
	}
}

// A bad update mask leaves nothing to plan: it is the one reason.
func TestDryRunBadMask(t *testing.T) {
	st := storeOf(t, dbWeb, "agent_A")
	req := replaceAll(t, "apiVersion: v1\n")
	req.UpdateMask = []string{"desiredState.workloads.*"}
	resp := planLeader(st, state.DefaultLimits()).dryRun(req, "", plan.Admission{})
	if resp.GetAccepted() || len(resp.GetRejections()) != 1 {
		t.Fatalf("want one rejection, got %v", resp.GetRejections())
	}
}

// A dry-run planned behind a proposal that then fails is not answered
// with its plan: the state it was planned on never came to be.
func TestDryRunBehindAFailedProposal(t *testing.T) {
	st := storeOf(t, dbWeb, "agent_A")
	l := planLeader(st, state.DefaultLimits())
	l.pipe = &pipeline{clock: clock.Real()}
	inFlight := &entry{typ: fsm.UpdateDesiredStatePackedType}
	l.pipe.queue = append(l.pipe.queue, inFlight)
	l.pipe.inFlight++

	c := &planCall{update: replaceAll(t, "apiVersion: v1\n"), reply: make(chan planAnswer, 1)}
	l.planCall(c)
	select {
	case a := <-c.reply:
		t.Fatalf("answered before the proposal ahead of it settled: %v", a)
	default:
	}
	inFlight.err = errors.New("lost")
	l.projected.markFailed()
	l.pipe.settle(inFlight, func(fsm.MessageType, time.Duration, uint64) {})
	a := <-c.reply
	if !errors.Is(a.err, errs.ErrStateChanged) || a.plan != nil {
		t.Fatalf("answer %v %v, want ErrStateChanged", a.plan, a.err)
	}

	// Once reloaded, the same dry-run is answered.
	l.projected.broken, l.projected.failed = false, false
	c = &planCall{update: replaceAll(t, "apiVersion: v1\n"), reply: make(chan planAnswer, 1)}
	l.planCall(c)
	if a := <-c.reply; a.err != nil || len(a.plan.GetWorkloads()) != 2 {
		t.Fatalf("answer %v %v", a.plan, a.err)
	}
}

// A plan larger than the message limit loses its field values first,
// then is refused.
func TestFitPlan(t *testing.T) {
	resp := func() *grapnelpb.PlanResponse {
		return &grapnelpb.PlanResponse{Workloads: []*grapnelpb.PlannedWorkload{{Name: "w", Change: "updated",
			Fields: []*grapnelpb.FieldChange{{Path: "runtimeConfig", Old: strings.Repeat("o", 1000), New: strings.Repeat("n", 1000)}}}}}
	}
	r := resp()
	if err := fitPlan(r, 4000); err != nil || r.Workloads[0].Fields[0].New == "" {
		t.Fatalf("a plan under the limit changed: %v %v", r, err)
	}
	if err := fitPlan(r, 500); err != nil || r.Workloads[0].Fields[0].New != "" || r.Workloads[0].Fields[0].Path != "runtimeConfig" || len(r.Warnings) != 1 {
		t.Fatalf("values kept: %v %v", r, err)
	}
	if err := fitPlan(resp(), 10); !errors.Is(err, errs.ErrMessageTooLarge) {
		t.Fatalf("a plan over the limit without values: %v", err)
	}
}

// A workload rendered again because a config item changed keeps its
// place in the delete graph, even when the server removes its old
// instance itself (its agent is not connected): the delete of a
// workload it depends on waits for it, in the plan as in the dispatch.
// The plan took it for deleted (found by TestPlanPredictsApply).
func TestDryRunRerenderedWorkloadStillHoldsADelete(t *testing.T) {
	const cur = `apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: db"
  app:
    runtime: podman
    agent: agent_A
    configs: {c: cfg}
    runtimeConfig: "image: app {{c}}"
    dependencies:
      db: ADD_COND_RUNNING
configs:
  cfg: "1"
`
	st := storeOf(t, cur, "agent_B") // agent_A is not connected
	next := strings.Replace(strings.Replace(cur, `cfg: "1"`, `cfg: "2"`, 1), "  db:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: \"image: db\"\n", "", 1)
	resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, next), "", plan.Admission{})
	want := []string{"agent_A: 0 add app [db ADD_COND_RUNNING]", "agent_B: 0 delete db [app DEL_COND_NOT_PENDING_NOR_RUNNING]"}
	if got := stepsText(resp); !slices.Equal(got, want) {
		t.Fatalf("steps\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	checkDeleteConditionsAsDispatched(t, st, next, resp)
}
