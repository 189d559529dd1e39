package placement

import (
	"fmt"
	"testing"
)

// BenchmarkAllocate is the allocator on a large vehicle: 16 agents in 4
// risk groups with capacities, 100 placed workloads of 1 to 3 instances,
// from a stable layout (what the leader runs after most updates) and from
// scratch.
func BenchmarkAllocate(b *testing.B) {
	var in Input
	for i := 0; i < 16; i++ {
		in.Agents = append(in.Agents, ag(fmt.Sprintf("a%02d", i), fmt.Sprintf("g%d", i%4), 30))
	}
	for w := 0; w < 100; w++ {
		in.Requests = append(in.Requests, Request{Workload: fmt.Sprintf("w%03d", w), Instances: 1 + w%3, Spread: true})
	}
	b.Run("from-scratch", func(b *testing.B) {
		for b.Loop() {
			Allocate(in)
		}
	})
	stable := in
	stable.Current = Allocate(in).Layout
	b.Run("stable", func(b *testing.B) {
		for b.Loop() {
			Allocate(stable)
		}
	})
}
