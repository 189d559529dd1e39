package placement

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// The allocator before its inner loop was rewritten for speed, kept
// verbatim as the reference: TestAllocateMatchesReference holds the
// faster one to the same layout and the same unsatisfied list on
// thousands of random inputs.

// refAgentInfo is an agent during one allocation.
type refAgentInfo struct {
	Agent
	known bool
	load  int
}

func (a *refAgentInfo) eligible() bool { return a.known && a.Present && a.Mode == state.ModeActive }
func (a *refAgentInfo) fixed() bool    { return a.known && a.Mode == state.ModeMaintenance }
func (a *refAgentInfo) room() bool     { return a.Capacity == Unlimited || a.load < a.Capacity }

// alloc is the state of one allocation.
type refAlloc struct {
	agents map[string]*refAgentInfo
	names  []string // sorted agent names
	reqs   []Request
	placed map[string]map[string]bool // workload → agents
}

// refAllocate is Allocate as it was before the allocator compared
// agents by number (issue 27): the reference the test holds it to.
func refAllocate(in Input) Result {
	a := &refAlloc{agents: map[string]*refAgentInfo{}, placed: map[string]map[string]bool{}}
	for _, ag := range in.Agents {
		a.agents[ag.Name] = &refAgentInfo{Agent: ag, known: true}
	}
	for n, k := range in.Pinned {
		if ai := a.agents[n]; ai != nil {
			ai.load += k
		}
	}
	a.names = make([]string, 0, len(a.agents))
	for n := range a.agents {
		a.names = append(a.names, n)
	}
	sort.Strings(a.names)
	a.reqs = append([]Request(nil), in.Requests...)
	sort.Slice(a.reqs, func(i, j int) bool { return a.reqs[i].Workload < a.reqs[j].Workload })

	a.keep(in.Current)
	a.trimCounts()
	a.trimCapacity()
	for changed := true; changed; {
		changed = a.fill()
		if a.repair() {
			changed = true
		}
	}
	return a.result()
}

// keep takes over the current instances that may stay where they are.
func (a *refAlloc) keep(cur Layout) {
	for _, r := range a.reqs {
		set := map[string]bool{}
		for _, n := range cur[r.Workload] {
			ai := a.agents[n]
			if ai == nil || set[n] || !(ai.fixed() || ai.eligible()) {
				continue
			}
			set[n] = true
			ai.load++
		}
		a.placed[r.Workload] = set
	}
}

// trimCounts drops the instances beyond what a workload asks for: first
// those on movable agents, the most crowded risk group and the most
// loaded agent first.
func (a *refAlloc) trimCounts() {
	for _, r := range a.reqs {
		set := a.placed[r.Workload]
		for len(set) > r.Instances {
			victim := a.worst(r.Workload, func(ai *refAgentInfo) bool { return !ai.fixed() })
			if victim == "" {
				victim = a.worst(r.Workload, func(*refAgentInfo) bool { return true })
			}
			a.remove(r.Workload, victim)
		}
	}
}

// trimCapacity drops placed instances from Active agents over their
// capacity (a capacity lowered, a workload pinned there), from the
// workloads last in name order. Nothing moves off an agent in Maintenance.
func (a *refAlloc) trimCapacity() {
	for _, n := range a.names {
		ai := a.agents[n]
		if ai.fixed() || ai.room() || ai.Capacity == Unlimited {
			continue
		}
		for i := len(a.reqs) - 1; i >= 0 && ai.load > ai.Capacity; i-- {
			if w := a.reqs[i].Workload; a.placed[w][n] {
				a.remove(w, n)
			}
		}
	}
}

// fill places missing instances; it reports whether it placed any.
func (a *refAlloc) fill() bool {
	changed := false
	for _, r := range a.reqs {
		for len(a.placed[r.Workload]) < r.Instances {
			t := a.best(r, nil)
			if t == "" {
				break
			}
			a.add(r.Workload, t)
			changed = true
		}
	}
	return changed
}

// repair moves instances of spread workloads out of shared risk groups
// while an agent with room in an unused group exists; it reports whether
// it moved any. Every move lowers the number of shared placements, so it
// ends.
func (a *refAlloc) repair() bool {
	changed := false
	for _, r := range a.reqs {
		if !r.Spread {
			continue
		}
		for {
			counts := a.groupCounts(r.Workload)
			if len(counts) == len(a.placed[r.Workload]) {
				break // no two instances share a group
			}
			src := a.worst(r.Workload, func(ai *refAgentInfo) bool { return !ai.fixed() && counts[ai.RiskGroup] > 1 })
			if src == "" {
				break
			}
			t := a.best(r, func(ai *refAgentInfo) bool { return counts[ai.RiskGroup] == 0 })
			if t == "" {
				break
			}
			a.remove(r.Workload, src)
			a.add(r.Workload, t)
			changed = true
		}
	}
	return changed
}

// best is the agent to place an instance of r on: eligible, with room,
// not hosting r yet and accepted by ok (if not nil); the fewest instances
// of r in its risk group first when r is spread, then the least loaded,
// then by name. "" if there is none.
func (a *refAlloc) best(r Request, ok func(*refAgentInfo) bool) string {
	counts := a.groupCounts(r.Workload)
	set := a.placed[r.Workload]
	pick := ""
	for _, n := range a.names {
		ai := a.agents[n]
		if !ai.eligible() || !ai.room() || set[n] || (ok != nil && !ok(ai)) {
			continue
		}
		if pick == "" || a.better(r.Spread, counts, ai, a.agents[pick]) {
			pick = n
		}
	}
	return pick
}

func (a *refAlloc) better(spread bool, counts map[string]int, x, y *refAgentInfo) bool {
	if spread && counts[x.RiskGroup] != counts[y.RiskGroup] {
		return counts[x.RiskGroup] < counts[y.RiskGroup]
	}
	if x.load != y.load {
		return x.load < y.load
	}
	return x.Name < y.Name
}

// worst is the instance of w to give up among the agents ok accepts: in
// the risk group with the most instances of w, on the most loaded agent,
// the last by name. "" if ok accepts none.
func (a *refAlloc) worst(w string, ok func(*refAgentInfo) bool) string {
	counts := a.groupCounts(w)
	pick := ""
	for _, n := range sortedAgents(a.placed[w]) {
		ai := a.agents[n]
		if !ok(ai) {
			continue
		}
		if pick == "" {
			pick = n
			continue
		}
		p := a.agents[pick]
		if c, pc := counts[ai.RiskGroup], counts[p.RiskGroup]; c != pc {
			if c > pc {
				pick = n
			}
			continue
		}
		if ai.load >= p.load {
			pick = n // names ascend: on a tie the later one wins
		}
	}
	return pick
}

func (a *refAlloc) groupCounts(w string) map[string]int {
	counts := map[string]int{}
	for n := range a.placed[w] {
		counts[a.agents[n].RiskGroup]++
	}
	return counts
}

func (a *refAlloc) add(w, n string) {
	a.placed[w][n] = true
	a.agents[n].load++
}

func (a *refAlloc) remove(w, n string) {
	delete(a.placed[w], n)
	a.agents[n].load--
}

// result is the layout and what it leaves unsatisfied.
func (a *refAlloc) result() Result {
	res := Result{Layout: Layout{}}
	for _, r := range a.reqs {
		set := a.placed[r.Workload]
		if len(set) > 0 {
			res.Layout[r.Workload] = sortedAgents(set)
		}
		if u, bad := a.unsatisfied(r); bad {
			res.Unsatisfied = append(res.Unsatisfied, u)
		}
	}
	return res
}

func (a *refAlloc) unsatisfied(r Request) (Unsatisfied, bool) {
	set := a.placed[r.Workload]
	u := Unsatisfied{Workload: r.Workload, Wanted: r.Instances, Placed: len(set)}
	if len(set) < r.Instances {
		u.Reason = ReasonNoEligibleAgent
		for _, n := range a.names {
			if ai := a.agents[n]; ai.eligible() && !set[n] && !ai.room() {
				u.Reason = ReasonCapacityExceeded
				break
			}
		}
		return u, true
	}
	if r.Spread && len(a.groupCounts(r.Workload)) < len(set) {
		u.Reason = ReasonSpreadImpossible
		return u, true
	}
	return u, false
}

// TestAllocateMatchesReference holds Allocate to the allocator it
// replaced: the same layout and the same unsatisfied workloads, on the
// random inputs of TestAllocateProperties and on larger ones (up to 24
// agents, whose names sort otherwise than their numbers, in up to 6 risk
// groups, with duplicated and unknown agents in the current layout),
// from scratch, from the layout it gave, and with an agent gone.
func TestAllocateMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(27))
	for iter := 0; iter < 4000; iter++ {
		in := randomInput(rng)
		if iter%2 == 1 {
			in = largerInput(rng)
		}
		check := func(what string, in Input) Result {
			got, want := Allocate(in), refAllocate(in)
			if !got.Layout.Equal(want.Layout) || !reflect.DeepEqual(got.Unsatisfied, want.Unsatisfied) {
				t.Fatalf("iteration %d, %s: input %+v\ngot  %v %v\nwant %v %v", iter, what, in, got.Layout, got.Unsatisfied, want.Layout, want.Unsatisfied)
			}
			return got
		}
		res := check("as given", in)
		scratch := in
		scratch.Current = nil
		check("from scratch", scratch)
		again := in
		again.Current = res.Layout
		check("from its own layout", again)
		if len(in.Agents) > 1 {
			gone := again
			gone.Agents = append([]Agent(nil), in.Agents[1:]...)
			check("an agent gone", gone)
		}
	}
}

func largerInput(rng *rand.Rand) Input {
	var in Input
	n := 1 + rng.Intn(24)
	groups := 1 + rng.Intn(6)
	in.Pinned = map[string]int{}
	for i := 0; i < n; i++ {
		a := ag(fmt.Sprintf("a%d", i), fmt.Sprintf("g%d", rng.Intn(groups)), Unlimited)
		if rng.Intn(3) == 0 {
			a.Capacity = rng.Intn(6)
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
	for w := 0; w < rng.Intn(12); w++ {
		r := Request{Workload: fmt.Sprintf("w%d", w), Instances: 1 + rng.Intn(8), Spread: rng.Intn(4) != 0}
		in.Requests = append(in.Requests, r)
		for i := 0; i < n+2; i++ { // beyond n: agents not in the list
			if rng.Intn(3) == 0 {
				in.Current[r.Workload] = append(in.Current[r.Workload], fmt.Sprintf("a%d", i))
			}
			if rng.Intn(20) == 0 { // a duplicate
				in.Current[r.Workload] = append(in.Current[r.Workload], fmt.Sprintf("a%d", i))
			}
		}
	}
	return in
}
