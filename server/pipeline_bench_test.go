package server

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// BenchmarkUpdateStateClients measures UpdateState throughput and latency
// on the one-replica harness (real Raft on raft-wal, gRPC on
// loopback) with 1, 16 and 64 CLI clients, each sending its next update
// as soon as the previous one is answered. Every update changes one
// workload of its client: mask, validation, rendering, diff, commit, and
// the UpdateWorkload to the agent.
func BenchmarkUpdateStateClients(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchUpdates(b, n) })
	}
}

func benchUpdates(b *testing.B, clients int) { benchUpdatesOn(b, clients, startServer(b, nil)) }

// BenchmarkUpdateStateHistory is BenchmarkUpdateStateClients with the
// transaction history kept (as always) and on an FSM that keeps none: the
// history's cost on UpdateState throughput (docs/history.md). Run with
// -count to compare ops/s.
func BenchmarkUpdateStateHistory(b *testing.B) {
	for _, n := range []int{1, 16} {
		for _, kept := range []bool{true, false} {
			b.Run(fmt.Sprintf("clients=%d/history=%v", n, kept), func(b *testing.B) {
				ts := startServerCfg(b, b.TempDir(), nil, func(c *Config) {
					if !kept {
						c.FSM = fsm.NewWithoutHistory()
					}
				})
				benchUpdatesOn(b, n, ts)
			})
		}
	}
}

func benchUpdatesOn(b *testing.B, clients int, ts *testServer) {
	// The agent that runs the workloads takes every UpdateWorkload; with
	// no agent the server would delete the old instances itself and
	// broadcast each removal to every CLI.
	ts.agent("agent_A", nil)
	streams := make([]*testConn, clients)
	for i := range streams {
		streams[i] = ts.cli()
	}
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for i := range streams {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = runClient(b, streams[i], i, &next, &lat[i])
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	// The process's CPU time per update (server and clients together):
	// steadier than ops/s on a machine shared with other jobs.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/op")
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClient sends updates until b.N have been taken by all clients.
func runClient(b *testing.B, c *testConn, i int, next *atomic.Int64, lat *[]time.Duration) error {
	for {
		k := next.Add(1)
		if k > int64(b.N) {
			return nil
		}
		id := fmt.Sprintf("b%d", k)
		req := workloadUpdate(b, id, fmt.Sprintf("w%d", i), fmt.Sprintf("image: busybox\nargs: [%d]", k))
		t0 := time.Now()
		if err := c.stream.Send(req); err != nil {
			return err
		}
		m, ok := c.tryExpect(30*time.Second, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id })
		if !ok {
			return fmt.Errorf("client %d: no answer to %s", i, id)
		}
		if m.GetResponse().GetUpdateStateSuccess() == nil {
			return fmt.Errorf("client %d: %v", i, m.GetResponse())
		}
		*lat = append(*lat, time.Since(t0))
	}
}
