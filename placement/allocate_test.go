package placement

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func ag(name, group string, capacity int) Agent {
	return Agent{Name: name, RiskGroup: group, Capacity: capacity, Present: true}
}

func withMode(a Agent, m state.AgentMode) Agent { a.Mode = m; return a }
func gone(a Agent) Agent                        { a.Present = false; return a }

func TestAllocateTable(t *testing.T) {
	three := []Agent{ag("a1", "g1", Unlimited), ag("a2", "g1", Unlimited), ag("b1", "g2", Unlimited), ag("c1", "g3", Unlimited)}
	cases := []struct {
		name  string
		in    Input
		want  Layout
		unsat []Unsatisfied
	}{
		{
			name: "spread over risk groups: one instance per group first",
			in:   Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 3, Spread: true}}},
			want: Layout{"w": {"a1", "b1", "c1"}},
		},
		{
			name: "without spread the least loaded agents win, by name",
			in:   Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 2}}, Pinned: map[string]int{"a1": 1}},
			want: Layout{"w": {"a2", "b1"}},
		},
		{
			name: "minimal change: a valid current layout is kept even if another would be more even",
			in: Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 2, Spread: true}},
				Pinned: map[string]int{"b1": 3}, Current: Layout{"w": {"b1", "c1"}}},
			want: Layout{"w": {"b1", "c1"}},
		},
		{
			name: "agent gone past grace: its instance moves to an unused risk group",
			in: Input{Agents: []Agent{ag("a1", "g1", Unlimited), ag("a2", "g1", Unlimited), gone(ag("b1", "g2", Unlimited)), ag("c1", "g3", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}, Current: Layout{"w": {"a1", "b1"}}},
			want: Layout{"w": {"a1", "c1"}},
		},
		{
			name: "agent unknown (gone, no mode): its instance moves",
			in: Input{Agents: []Agent{ag("a1", "g1", Unlimited), ag("c1", "g3", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}, Current: Layout{"w": {"a1", "b1"}}},
			want: Layout{"w": {"a1", "c1"}},
		},
		{
			name: "disabled agent is drained",
			in: Input{Agents: []Agent{ag("a1", "g1", Unlimited), withMode(ag("b1", "g2", Unlimited), state.ModeDisabled), ag("c1", "g3", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}, Current: Layout{"w": {"a1", "b1"}}},
			want: Layout{"w": {"a1", "c1"}},
		},
		{
			name: "maintenance keeps its instance even when disconnected, and gets no new one",
			in: Input{Agents: []Agent{gone(withMode(ag("a1", "g1", Unlimited), state.ModeMaintenance)), withMode(ag("b1", "g2", Unlimited), state.ModeMaintenance), ag("c1", "g3", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 3, Spread: true}}, Current: Layout{"w": {"a1"}}},
			want:  Layout{"w": {"a1", "c1"}},
			unsat: []Unsatisfied{{Workload: "w", Wanted: 3, Placed: 2, Reason: ReasonNoEligibleAgent}},
		},
		{
			name: "capacity counts pinned workloads and is never exceeded",
			in: Input{Agents: []Agent{ag("a1", "g1", 1), ag("b1", "g2", 2)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}, Pinned: map[string]int{"a1": 1, "b1": 1}},
			want:  Layout{"w": {"b1"}},
			unsat: []Unsatisfied{{Workload: "w", Wanted: 2, Placed: 1, Reason: ReasonCapacityExceeded}},
		},
		{
			name: "capacity lowered: the last workload by name gives way",
			in: Input{Agents: []Agent{ag("a1", "g1", 1), ag("b1", "g2", Unlimited)},
				Requests: []Request{{Workload: "x", Instances: 1}, {Workload: "y", Instances: 1}}, Current: Layout{"x": {"a1"}, "y": {"a1"}}},
			want: Layout{"x": {"a1"}, "y": {"b1"}},
		},
		{
			name:  "spread impossible: fewer risk groups than instances",
			in:    Input{Agents: []Agent{ag("a1", "g1", Unlimited), ag("a2", "g1", Unlimited)}, Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}},
			want:  Layout{"w": {"a1", "a2"}},
			unsat: []Unsatisfied{{Workload: "w", Wanted: 2, Placed: 2, Reason: ReasonSpreadImpossible}},
		},
		{
			name: "spread repaired once a group has room",
			in: Input{Agents: []Agent{ag("a1", "g1", Unlimited), ag("a2", "g1", Unlimited), ag("b1", "g2", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}}, Current: Layout{"w": {"a1", "a2"}}},
			want: Layout{"w": {"a1", "b1"}},
		},
		{
			name: "fewer instances asked: the crowded group gives one up",
			in: Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 2, Spread: true}},
				Current: Layout{"w": {"a1", "a2", "b1"}}},
			want: Layout{"w": {"a1", "b1"}},
		},
		{
			name:  "no agent at all",
			in:    Input{Requests: []Request{{Workload: "w", Instances: 1}}},
			want:  Layout{},
			unsat: []Unsatisfied{{Workload: "w", Wanted: 1, Placed: 0, Reason: ReasonNoEligibleAgent}},
		},
		{
			name: "a missing instance goes to the agent that may still run it, though another is less loaded",
			in: Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 2}}, Pinned: map[string]int{"c1": 2},
				Current: Layout{"w": {"a1"}}, Adoptable: Layout{"w": {"c1"}}},
			want: Layout{"w": {"a1", "c1"}},
		},
		{
			name: "the spread comes before adoption: an adopted instance in a used group would move again",
			in: Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 2, Spread: true}},
				Current: Layout{"w": {"a1"}}, Adoptable: Layout{"w": {"a2"}}},
			want: Layout{"w": {"a1", "b1"}},
		},
		{
			name: "adoption among agents of equal spread: the one that may still run it",
			in: Input{Agents: []Agent{ag("a1", "g1", Unlimited), ag("b1", "g2", Unlimited), ag("b2", "g2", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 2, Spread: true}},
				Current:  Layout{"w": {"a1"}}, Adoptable: Layout{"w": {"b2"}}},
			want: Layout{"w": {"a1", "b2"}},
		},
		{
			name: "adoption moves no instance that may stay",
			in: Input{Agents: three, Requests: []Request{{Workload: "w", Instances: 1}},
				Current: Layout{"w": {"a1"}}, Adoptable: Layout{"w": {"c1"}}},
			want: Layout{"w": {"a1"}},
		},
		{
			name: "an agent that may still run it but may not host it is passed over: full, disabled, gone, unknown",
			in: Input{Agents: []Agent{ag("a1", "g1", 0), withMode(ag("a2", "g1", Unlimited), state.ModeDisabled),
				gone(ag("a3", "g1", Unlimited)), ag("b1", "g2", Unlimited)},
				Requests: []Request{{Workload: "w", Instances: 1}}, Adoptable: Layout{"w": {"a1", "a2", "a3", "x9"}}},
			want: Layout{"w": {"b1"}},
		},
		{
			name: "a workload no longer placed leaves the layout",
			in:   Input{Agents: three, Current: Layout{"old": {"a1"}}},
			want: Layout{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Allocate(c.in)
			if !got.Layout.Equal(c.want) {
				t.Fatalf("layout = %v, want %v", got.Layout, c.want)
			}
			if !reflect.DeepEqual(got.Unsatisfied, c.unsat) {
				t.Fatalf("unsatisfied = %+v, want %+v", got.Unsatisfied, c.unsat)
			}
			again := c.in
			again.Current = got.Layout
			if r := Allocate(again); !r.Layout.Equal(got.Layout) {
				t.Fatalf("not idempotent: %v then %v", got.Layout, r.Layout)
			}
		})
	}
}

// randomInput is a random cluster: up to 8 agents in up to 4 risk
// groups, some with a capacity, mode or gone; up to 6 placed workloads;
// pinned workloads; a random current layout (possibly invalid).
func randomInput(rng *rand.Rand) Input {
	var in Input
	n := 1 + rng.Intn(8)
	groups := 1 + rng.Intn(4)
	in.Pinned = map[string]int{}
	for i := 0; i < n; i++ {
		a := ag(fmt.Sprintf("a%d", i), fmt.Sprintf("g%d", rng.Intn(groups)), Unlimited)
		if rng.Intn(3) == 0 {
			a.Capacity = rng.Intn(4)
		}
		switch rng.Intn(8) {
		case 0:
			a.Mode = state.ModeMaintenance
		case 1:
			a.Mode = state.ModeDisabled
		}
		a.Present = rng.Intn(6) != 0
		if rng.Intn(3) == 0 {
			in.Pinned[a.Name] = rng.Intn(3)
		}
		in.Agents = append(in.Agents, a)
	}
	in.Current = Layout{}
	for w := 0; w < rng.Intn(7); w++ {
		r := Request{Workload: fmt.Sprintf("w%d", w), Instances: 1 + rng.Intn(4), Spread: rng.Intn(4) != 0}
		in.Requests = append(in.Requests, r)
		for i := 0; i < n+1; i++ { // n+1: an agent not in the list at all
			if rng.Intn(3) == 0 {
				in.Current[r.Workload] = append(in.Current[r.Workload], fmt.Sprintf("a%d", i))
			}
		}
	}
	return in
}

// The allocator's properties over random layouts: idempotence, capacity
// never exceeded by what it placed, only eligible or Maintenance agents,
// one instance per agent, at most the instances asked, spread respected
// whenever an agent with room in an unused group exists, maintenance
// instances never moved, and minimal change (an agent gone from a stable
// layout changes no workload that had no instance on it).
func TestAllocateProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(16))
	for iter := 0; iter < 3000; iter++ {
		in := randomInput(rng)
		if iter%2 == 1 {
			in.Adoptable = randomAdoptable(rng, in)
		}
		res := Allocate(in)
		desc := fmt.Sprintf("iteration %d, input %+v, layout %v", iter, in, res.Layout)
		agents := map[string]Agent{}
		for _, a := range in.Agents {
			agents[a.Name] = a
		}
		// Idempotence.
		again := in
		again.Current = res.Layout
		if r2 := Allocate(again); !r2.Layout.Equal(res.Layout) || !reflect.DeepEqual(r2.Unsatisfied, res.Unsatisfied) {
			t.Fatalf("not idempotent: %s; again %v", desc, r2.Layout)
		}
		load := map[string]int{}
		for w, as := range res.Layout {
			for i, n := range as {
				a, ok := agents[n]
				if !ok || !(a.Mode == state.ModeMaintenance || (a.Mode == state.ModeActive && a.Present)) {
					t.Fatalf("%s on agent %s that may not host it: %s", w, n, desc)
				}
				if i > 0 && as[i-1] >= n {
					t.Fatalf("agents of %s not sorted and unique: %s", w, desc)
				}
				load[n]++
			}
		}
		// Capacity: what an Active agent hosts stays within it unless
		// pinned workloads alone exceed it.
		for n, k := range load {
			a := agents[n]
			if a.Mode == state.ModeActive && a.Capacity != Unlimited && k+in.Pinned[n] > a.Capacity {
				t.Fatalf("agent %s over capacity %d: %d placed + %d pinned: %s", n, a.Capacity, k, in.Pinned[n], desc)
			}
		}
		for _, r := range in.Requests {
			as := res.Layout[r.Workload]
			if len(as) > r.Instances {
				t.Fatalf("%s has %d instances, asked %d: %s", r.Workload, len(as), r.Instances, desc)
			}
			// Maintenance instances stay (unless the count went down).
			inLayout := toSet(as)
			for _, n := range in.Current[r.Workload] {
				if a, ok := agents[n]; ok && a.Mode == state.ModeMaintenance && !inLayout[n] && len(as) == r.Instances && len(toSet(in.Current[r.Workload])) <= r.Instances {
					t.Fatalf("%s moved off maintenance agent %s: %s", r.Workload, n, desc)
				}
			}
			// Spread whenever possible: no shared group while an eligible
			// agent with room sits in a group the workload does not use.
			if !r.Spread {
				continue
			}
			groups := map[string]int{}
			movable := map[string]bool{}
			for _, n := range as {
				groups[agents[n].RiskGroup]++
				if agents[n].Mode == state.ModeActive {
					movable[agents[n].RiskGroup] = true
				}
			}
			shared := false
			for g, k := range groups {
				if k > 1 && movable[g] {
					shared = true
				}
			}
			if !shared {
				continue
			}
			for _, a := range in.Agents {
				hasRoom := a.Capacity == Unlimited || load[a.Name]+in.Pinned[a.Name] < a.Capacity
				if a.Mode == state.ModeActive && a.Present && hasRoom && groups[a.RiskGroup] == 0 {
					t.Fatalf("%s shares a risk group while %s (group %s) has room: %s", r.Workload, a.Name, a.RiskGroup, desc)
				}
			}
		}
		// Minimal change: one agent gone from the stable layout touches
		// only the workloads it hosted.
		if len(in.Agents) == 0 {
			continue
		}
		victim := in.Agents[rng.Intn(len(in.Agents))].Name
		after := Input{Requests: in.Requests, Pinned: in.Pinned, Current: res.Layout, Adoptable: in.Adoptable}
		for _, a := range in.Agents {
			if a.Name != victim {
				after.Agents = append(after.Agents, a)
			}
		}
		r3 := Allocate(after)
		for _, r := range in.Requests {
			if toSet(res.Layout[r.Workload])[victim] {
				continue
			}
			if !equalStrings(r3.Layout[r.Workload], res.Layout[r.Workload]) {
				t.Fatalf("agent %s gone changed %s, which it did not host: %v -> %v: %s", victim, r.Workload, res.Layout[r.Workload], r3.Layout[r.Workload], desc)
			}
		}
	}
}

func equalStrings(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// randomAdoptable marks random agents, some not in the input at all, as
// still running an instance of random workloads of in.
func randomAdoptable(rng *rand.Rand, in Input) Layout {
	out := Layout{}
	for _, r := range in.Requests {
		for i := 0; i <= len(in.Agents); i++ {
			if rng.Intn(3) == 0 {
				out[r.Workload] = append(out[r.Workload], fmt.Sprintf("a%d", i))
			}
		}
	}
	return out
}

// Adoption only breaks ties: a workload's new instance goes to an agent
// that may still run one whenever such an agent could host it and ranks
// as well for the spread as the agent chosen; and where no agent may
// still run one, the answer is the one without Adoptable.
func TestAllocatePrefersAdoption(t *testing.T) {
	rng := rand.New(rand.NewSource(30))
	for iter := 0; iter < 3000; iter++ {
		in := randomInput(rng)
		in.Current = nil // every instance is new
		in.Adoptable = randomAdoptable(rng, in)
		res := Allocate(in)
		desc := fmt.Sprintf("iteration %d, input %+v, layout %v", iter, in, res.Layout)
		plain := in
		plain.Adoptable = nil
		none := Layout{}
		for w := range in.Adoptable {
			none[w] = []string{"nobody"}
		}
		plain2 := in
		plain2.Adoptable = none
		if a, b := Allocate(plain), Allocate(plain2); !a.Layout.Equal(b.Layout) || !reflect.DeepEqual(a.Unsatisfied, b.Unsatisfied) {
			t.Fatalf("an Adoptable naming no agent changed the answer: %v vs %v: %s", a.Layout, b.Layout, desc)
		}
		// A single workload: each instance placed on an agent that may
		// not still run one had no such agent left with room in a group
		// as good for the spread. Checked by placing the workload alone.
		if len(in.Requests) != 1 {
			continue
		}
		r := in.Requests[0]
		adopt := toSet(in.Adoptable[r.Workload])
		agents := map[string]Agent{}
		for _, a := range in.Agents {
			agents[a.Name] = a
		}
		placed := toSet(res.Layout[r.Workload])
		var adopted, others int
		for n := range placed {
			if adopt[n] {
				adopted++
			} else {
				others++
			}
		}
		if others == 0 {
			continue
		}
		for n := range adopt {
			a, ok := agents[n]
			if !ok || placed[n] || a.Mode != state.ModeActive || !a.Present {
				continue
			}
			if a.Capacity != Unlimited && in.Pinned[n]+1 > a.Capacity {
				continue
			}
			if r.Spread {
				continue // the groups decide first; the table covers it
			}
			t.Fatalf("%s placed on agents that may not still run it while %s, which may and has room, got none: %s", r.Workload, n, desc)
		}
	}
}

func TestDiff(t *testing.T) {
	got := Diff(Layout{"w": {"a", "b"}, "x": {"c"}}, Layout{"w": {"b", "c"}, "y": {"a"}})
	want := []Change{
		{Workload: "w", Added: []string{"c"}, Removed: []string{"a"}},
		{Workload: "x", Removed: []string{"c"}},
		{Workload: "y", Added: []string{"a"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff = %+v, want %+v", got, want)
	}
}

func TestTagsErrorsNameTheField(t *testing.T) {
	cases := []struct {
		tags map[string]string
		wl   string
		err  string
	}{
		{map[string]string{TagInstances: "0"}, "", "desiredState.workloads.w.tags[grapnel.io/instances]: \"0\" is not a whole number from 1 to 64"},
		{map[string]string{TagInstances: "x"}, "", "desiredState.workloads.w.tags[grapnel.io/instances]"},
		{map[string]string{TagInstances: "2", TagSpread: "rack"}, "", "desiredState.workloads.w.tags[grapnel.io/spread]: \"rack\""},
		{map[string]string{TagSpread: "none"}, "", "needs grapnel.io/instances"},
		{map[string]string{TagInstances: "2"}, "a1", "a workload is either pinned (agent) or placed"},
	}
	for _, c := range cases {
		_, _, err := RequestOf("w", &state.Workload{Agent: c.wl, Tags: c.tags})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("RequestOf(%v) = %v, want an error containing %q", c.tags, err, c.err)
		}
	}
	r, ok, err := RequestOf("w", &state.Workload{Tags: map[string]string{TagInstances: "3", TagSpread: "none"}})
	if err != nil || !ok || r != (Request{Workload: "w", Instances: 3}) {
		t.Fatalf("RequestOf = %+v %v %v", r, ok, err)
	}
	if _, _, err := AgentTags("a1", map[string]string{TagCapacity: "-1"}); err == nil || !strings.Contains(err.Error(), "agent a1: tag grapnel.io/capacity") {
		t.Fatalf("AgentTags error = %v", err)
	}
	if g, c, err := AgentTags("a1", nil); err != nil || g != "agent:a1" || c != Unlimited {
		t.Fatalf("AgentTags(nil) = %q %d %v", g, c, err)
	}
}

// TestAllocateAtTheLimitsAllocatesPerWorkload: at the default limits'
// most instances (1,000 workloads of 64 on 500 agents in 8 risk groups)
// the allocator allocates per workload, not per instance placed. It
// built a map of the workload's risk groups and looked every agent up by
// name for each instance, 4 to 6 s of the leader loop from scratch
// (BenchmarkAllocateAtTheLimits); the allocations, unlike the time, do
// not depend on the machine's load.
func TestAllocateAtTheLimitsAllocatesPerWorkload(t *testing.T) {
	var in Input
	for i := 0; i < 500; i++ {
		in.Agents = append(in.Agents, ag(fmt.Sprintf("agent_%03d", i), fmt.Sprintf("rack_%d", i%8), Unlimited))
	}
	for w := 0; w < 1000; w++ {
		in.Requests = append(in.Requests, Request{Workload: fmt.Sprintf("wl_%04d", w), Instances: MaxInstances, Spread: true})
	}
	var placed int
	allocs := testing.AllocsPerRun(1, func() {
		placed = 0
		for _, as := range Allocate(in).Layout {
			placed += len(as)
		}
	})
	if placed != 1000*MaxInstances {
		t.Fatalf("placed %d instances, want %d", placed, 1000*MaxInstances)
	}
	if allocs > float64(placed)/2 {
		t.Fatalf("%v allocations to place %d instances: the allocator allocates per instance", allocs, placed)
	}
}
