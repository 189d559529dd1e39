package bench

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

// BenchmarkInProcessUpdates runs the UpdateState load of grapnel-bench
// against three replicas in this process (server/testcluster), so that
// -cpuprofile sees the leader and both followers at once. Each b.N is one
// acknowledged update; the figures of record come from make bench.
func BenchmarkInProcessUpdates(b *testing.B) {
	for _, clients := range []int{1, 16} {
		for _, commanders := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/commanders=%v", clients, commanders), func(b *testing.B) {
				c := testcluster.New(b, 3, clustertest.WithLog(io.Discard, "error"))
				c.WaitServing(20 * time.Second)
				op, ws, err := GrapnelOp(c.Addrs(), client.Options{Insecure: true}, clients, 256, 5*time.Second, false, commanders)
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					for _, w := range ws {
						w.Close()
					}
				}()
				ctx := context.Background()
				for i := range clients {
					if err := op(ctx, i, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				s, err := RunLoad(ctx, "grapnel", LoadConfig{Clients: clients, Count: b.N, Duration: time.Minute}, op)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(s.Ops)/(float64(s.ElapsedNs)/1e9), "ops/s")
			})
		}
	}
}
