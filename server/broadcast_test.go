package server

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// A broadcast costs the leader loop its states once, however many
// streams get it: a commit of a batch of 1,024 reported states sent to
// 500 streams allocates little more than one sent to a single stream.
// It gathered and copied the states for every stream, 500 times the
// work, which held the loop for up to a second per batch at the default
// limits (issue 27). Bytes allocated, unlike time, do not depend on the
// machine's load.
func TestBroadcastCostsItsStatesOnce(t *testing.T) {
	ws := make([]state.WorkloadState, 1024)
	for i := range ws {
		ws[i] = state.WorkloadState{Instance: state.NewInstanceName(fmt.Sprintf("wl_%04d", i), "agent_0", "x"), State: state.RunningOk}
	}
	alloc := func(streams int) uint64 {
		l := planLeader(state.NewStore(), state.Limits{})
		l.s.conns = newRegistry()
		l.greeted = map[string]greeting{}
		for i := range streams {
			c := newConn(fmt.Sprintf("cli-%d", i), wire.KindCLI)
			l.s.conns.add(c)
		}
		bs := []pendingBroadcast{{except: "agent_0", states: ws, index: 2}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l.sendBroadcasts(bs)
		runtime.ReadMemStats(&after)
		for _, c := range l.s.conns.broadcastTargets("") {
			if len(c.out) != 1 {
				t.Fatalf("%s got %d messages, want 1", c.name, len(c.out))
			}
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	one, many := alloc(1), alloc(500)
	t.Logf("bytes allocated: %d for one stream, %d for 500", one, many)
	if many > 2*one+500*1024 {
		t.Fatalf("a broadcast to 500 streams allocated %d bytes, one to a single stream %d: the states are gathered per stream", many, one)
	}
}
