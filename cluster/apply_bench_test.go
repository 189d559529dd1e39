package cluster_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// BenchmarkApply3 measures raw Raft commits of 3 in-process replicas on
// loopback with concurrent proposers, the floor under UpdateState.
func BenchmarkApply3(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := clustertest.New(b, 3)
			c.WaitLeader(10 * time.Second)
			payload := strings.Repeat("x", 256)
			cmd, err := fsm.Encode(&fsm.AgentConnectedRequest{Name: "a", Tags: map[string]string{"p": payload}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				failed int
			)
			per := b.N/clients + 1
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						// A leader change under load is counted, not fatal:
						// the benchmark measures commits, the tests prove
						// failover.
						if _, err := c.Apply(cmd); err != nil {
							mu.Lock()
							failed++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*clients-failed)/time.Since(start).Seconds(), "ops/s")
			b.ReportMetric(float64(failed), "failed")
		})
	}
}
