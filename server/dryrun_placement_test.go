package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// placedStore is a store holding the manifest y, applied as an update,
// with the agents connected with their tags, and the layout the
// allocator gives it applied, as the leader's Placement entry would.
func placedStore(t testing.TB, y string, agents map[string]map[string]string) *state.Store {
	t.Helper()
	s, _, err := state.ParseManifest([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore()
	for _, a := range state.SortedKeys(agents) {
		st.AgentConnected(a, agents[a])
	}
	p, err := plan.Make(render.New(), state.Limits{}, plan.Admission{}, st, s, nil, plan.ConnectedIn(st))
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyDesired(&p.Update, 1)
	if pl := plan.Place(st, nil); pl.Update.Layout != nil {
		st.ApplyPlacement(&pl.Update)
	}
	return st
}

const twoLoggers = `apiVersion: v1
workloads:
  logger:
    runtime: podman
    agent: ""
    tags:
      grapnel.io/instances: "2"
      grapnel.io/spread: none
    runtimeConfig: "image: logger"
`

// A placed workload of two instances whose spec changes: on each agent
// the new instance waits for the removal of the old one there (D4: the
// steps were keyed by workload name, so only the last agent's add
// waited, and the other's ran in wave 0 beside its delete).
func TestDryRunPlacedInstancesWaitOnTheirOwnAgent(t *testing.T) {
	st := placedStore(t, twoLoggers, map[string]map[string]string{"a1": nil, "a2": nil})
	if got := st.Placement["logger"]; len(got) != 2 {
		t.Fatalf("layout %v, want logger on two agents", st.Placement)
	}
	next := strings.Replace(twoLoggers, "image: logger", "image: logger2", 1)
	resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, next), "", plan.Admission{})
	want := []string{
		"a1: 0 delete logger",
		"a1: 1 add logger [logger* REMOVED]",
		"a2: 0 delete logger",
		"a2: 1 add logger [logger* REMOVED]",
	}
	if got := stepsText(resp); !slices.Equal(got, want) {
		t.Fatalf("steps\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// A new placed workload gets its agents and their steps in the dry-run:
// the plan runs the allocator on the store the update makes (D7).
func TestDryRunPlacesANewPlacedWorkload(t *testing.T) {
	st := placedStore(t, "apiVersion: v1\n", map[string]map[string]string{"a1": nil, "a2": nil, "a3": {"grapnel.io/capacity": "0"}})
	resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, twoLoggers), "", plan.Admission{})
	if !resp.GetAccepted() {
		t.Fatalf("rejected: %v", resp.GetRejections())
	}
	want := []string{"a1: 0 add logger", "a2: 0 add logger"}
	if got := stepsText(resp); !slices.Equal(got, want) {
		t.Fatalf("steps\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if !slices.ContainsFunc(resp.GetWarnings(), func(w string) bool {
		return strings.Contains(w, "'logger' is laid out anew after the update: onto a1, a2")
	}) {
		t.Fatalf("no warning names the layout: %q", resp.GetWarnings())
	}
}

// A pinned workload added to a full agent evicts the placed instance
// there: the dry-run shows it deleted there and added elsewhere, after
// the pinned one's own step (D7).
func TestDryRunShowsAnEviction(t *testing.T) {
	const mon = `apiVersion: v1
workloads:
  mon:
    runtime: podman
    agent: ""
    tags:
      grapnel.io/instances: "1"
    runtimeConfig: "image: mon"
`
	agents := map[string]map[string]string{"a1": {"grapnel.io/capacity": "1"}, "a2": {"grapnel.io/capacity": "1"}}
	st := placedStore(t, mon, agents)
	on := st.Placement["mon"]
	if len(on) != 1 {
		t.Fatalf("layout %v", st.Placement)
	}
	full, free := on[0], map[string]string{"a1": "a2", "a2": "a1"}[on[0]]
	next := mon + "  pin:\n    runtime: podman\n    agent: " + full + "\n    runtimeConfig: \"image: pin\"\n"
	resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, next), "", plan.Admission{})
	want := []string{
		full + ": 0 add pin",
		full + ": 0 delete mon",
		free + ": 0 add mon",
	}
	got := stepsText(resp)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("steps\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if !slices.ContainsFunc(resp.GetWarnings(), func(w string) bool {
		return strings.Contains(w, "'mon' is laid out anew after the update: onto "+free+" off "+full)
	}) {
		t.Fatalf("no warning names the eviction: %q", resp.GetWarnings())
	}
}

// Issue 30 point 9, found by agent.TestSeams: lowering a placed
// workload's instance count (only its grapnel.io/ tags change) replaces
// none of its instances. It restarted the instance that stays (a delete
// and an add of the same name on its agent) and listed the one removed
// twice. Now the update only stores the new tags; the allocator then
// removes the instance it no longer wants, and the dry-run says so.
func TestPlacementTagsChangeReplacesNoInstance(t *testing.T) {
	st := placedStore(t, twoLoggers, map[string]map[string]string{"a1": nil, "a2": nil})
	if got := st.Placement["logger"]; len(got) != 2 {
		t.Fatalf("layout %v, want logger on two agents", st.Placement)
	}
	next, _, err := state.ParseManifest([]byte(strings.Replace(twoLoggers, `grapnel.io/instances: "2"`, `grapnel.io/instances: "1"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(render.New(), state.Limits{}, plan.Admission{}, st, next, nil, plan.ConnectedIn(st))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Added) != 0 || len(p.Deleted) != 0 || !p.Changed {
		t.Fatalf("added %v, deleted %v, changed %v: want only the new tags stored", p.Added, p.Deleted, p.Changed)
	}
	if r := p.Update.PutRendered["logger"]; r.Workload.Tags["grapnel.io/instances"] != "1" || r.Instance != st.Rendered["logger"].Instance {
		t.Fatalf("stored rendering %+v", r)
	}
	after := st.ForPlanning()
	after.ApplyDesired(&p.Update, 2)
	pl := plan.Place(after, nil)
	if got := pl.Update.Layout["logger"]; len(got) != 1 {
		t.Fatalf("the allocator's layout after it %v, want one agent", pl.Update.Layout)
	}
	resp := planLeader(st, state.DefaultLimits()).dryRun(replaceAll(t, strings.Replace(twoLoggers, `grapnel.io/instances: "2"`, `grapnel.io/instances: "1"`, 1)), "", plan.Admission{})
	steps := stepsText(resp)
	if len(steps) != 1 || !strings.Contains(steps[0], "delete logger") {
		t.Fatalf("dry-run steps %v, want one delete (the instance the allocator removes)", steps)
	}
}
