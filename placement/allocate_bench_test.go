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

// BenchmarkAllocateAtTheLimits is the allocator's worst run at the
// server's default limits, which the leader loop pays in one step: 1,000
// placed workloads of MaxInstances (64) instances on 500 agents (about
// the 512 streams a replica holds) in 8 risk groups, from scratch (an
// update that adds them all), and from a stable layout with one agent
// gone (its 128 instances move).
func BenchmarkAllocateAtTheLimits(b *testing.B) {
	var in Input
	for i := 0; i < 500; i++ {
		in.Agents = append(in.Agents, ag(fmt.Sprintf("agent_%03d", i), fmt.Sprintf("rack_%d", i%8), Unlimited))
	}
	for w := 0; w < 1000; w++ {
		in.Requests = append(in.Requests, Request{Workload: fmt.Sprintf("wl_%04d", w), Instances: MaxInstances, Spread: true})
	}
	b.Run("from-scratch", func(b *testing.B) {
		for b.Loop() {
			Allocate(in)
		}
	})
	gone := in
	gone.Current = Allocate(in).Layout
	gone.Agents = in.Agents[1:]
	b.Run("agent-gone", func(b *testing.B) {
		for b.Loop() {
			Allocate(gone)
		}
	})
}
