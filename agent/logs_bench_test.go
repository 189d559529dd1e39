package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/logs"
	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// countingRuntime counts the log readers the campaigns hold open.
type countingRuntime struct {
	runtime.Runtime
	open atomic.Int64
}

func (r *countingRuntime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	rc, err := r.Runtime.Logs(ctx, id, o)
	if err != nil {
		return nil, err
	}
	r.open.Add(1)
	return &countedReader{ReadCloser: rc, n: &r.open}, nil
}

type countedReader struct {
	io.ReadCloser
	n    *atomic.Int64
	once sync.Once
}

func (c *countedReader) Close() error {
	c.once.Do(func() { c.n.Add(-1) })
	return c.ReadCloser.Close()
}

// footprint is what the process holds: resident memory, Go heap and
// stacks in use, open descriptors, goroutines.
type footprint struct {
	rss, heap, stacks, fds, goroutines int64
}

func measure(b *testing.B) footprint {
	b.Helper()
	goruntime.GC()
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	var rss int64
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	return footprint{rss: rss, heap: int64(ms.HeapInuse), stacks: int64(ms.StackInuse), fds: int64(len(fds)), goroutines: int64(goruntime.NumGoroutine())}
}

// BenchmarkIdleFollowCampaigns measures what N idle follow campaigns of
// one process workload cost the agent, as in issue 27 (point 5): a
// workload opening thousands of `logs -f` campaigns. It reports the growth
// per requested campaign; run it with -benchtime=1x -count=N for a spread.
func BenchmarkIdleFollowCampaigns(b *testing.B) {
	const n = 1000
	runFolder := b.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := process.New(process.Config{RunFolder: runFolder, Logger: quiet, StopGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	w := &state.Workload{Agent: "agent_A", Runtime: "process", RuntimeConfig: "command: sleep\nargs: ['600']"}
	inst := state.NewInstanceName("quiet", "agent_A", w.RuntimeConfig)
	runDir := filepath.Join(runFolder, "agent_A_io", inst.String())
	if err := runtime.PrepareRunDir(runDir, nil); err != nil {
		b.Fatal(err)
	}
	id, err := rt.Create(context.Background(), runtime.Spec{Instance: inst, Workload: w, RunDir: runDir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Delete(context.Background(), id) })
	testwait.For(b, runWithin, func() bool {
		rc, err := rt.Logs(context.Background(), id, runtime.LogOptions{Tail: -1})
		if err != nil {
			return false
		}
		_ = rc.Close()
		return true
	}, "the output log of %s", inst)

	counting := &countingRuntime{Runtime: rt}
	// caps n: every campaign runs, the cost of one; the defaults: what a
	// flood of n costs the agent as it ships.
	b.Run("caps=n", func(b *testing.B) { followCampaigns(b, counting, inst, id, n, n, n) })
	b.Run("caps=default", func(b *testing.B) {
		followCampaigns(b, counting, inst, id, n, 0, min(n, logs.DefaultMaxCampaigns, logs.DefaultMaxSources))
	})
}

// followCampaigns starts n follow campaigns of inst with the cap max (0:
// the default), waits for open readers, and reports the growth per
// requested campaign.
func followCampaigns(b *testing.B, counting *countingRuntime, inst state.InstanceName, id runtime.ID, n, max, open int) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var sent atomic.Int64
	follow := true
	name := rpc.InstanceNameToProto(inst)
	for b.Loop() {
		c := logs.New(logs.Config{
			Lookup:       func(state.InstanceName) (runtime.Runtime, runtime.ID, bool) { return counting, id, true },
			Send:         func(*grpcapi.ToServer) error { sent.Add(1); return nil },
			Logger:       quiet,
			MaxCampaigns: max, MaxSources: max,
		})
		before := measure(b)
		for i := range n {
			c.Start(&grpcapi.LogsRequest{RequestId: "wl@agent_A@" + strconv.Itoa(i),
				LogsRequest: &ankbase.LogsRequest{WorkloadNames: []*ankbase.WorkloadInstanceName{name}, Follow: &follow}})
		}
		testwait.For(b, runWithin, func() bool {
			s := c.Stats()
			return counting.open.Load() == int64(open) && s.RefusedCampaigns+s.RefusedSources == uint64(n-open)
		}, "%d sources open", open)
		after := measure(b)
		c.StopAll()
		testwait.For(b, runWithin, func() bool { return counting.open.Load() == 0 }, "sources closed")
		per := func(a, z int64) float64 { return float64(z-a) / float64(n) }
		b.ReportMetric(per(before.rss, after.rss), "rss-B/campaign")
		b.ReportMetric(per(before.heap, after.heap), "heap-B/campaign")
		b.ReportMetric(per(before.stacks, after.stacks), "stack-B/campaign")
		b.ReportMetric(per(before.fds, after.fds), "fds/campaign")
		b.ReportMetric(per(before.goroutines, after.goroutines), "goroutines/campaign")
	}
}
