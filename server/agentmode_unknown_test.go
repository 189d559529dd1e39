package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 30, point 8, D14): `agent disable|maintenance` of
// an agent the cluster knows nothing of is refused with NOT_FOUND naming
// it, and writes nothing (it used to list a phantom Disabled agent while
// the real one, misspelled, stayed Active). An agent known but not
// connected (one a workload names, before it ever connects) may be set.
func TestSetAgentModeOfUnknownAgentRefused(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb))
	cc := grapnelpb.NewClusterClient(dialRaw(t, ts.addr))
	ctx := callCtx(t)
	// Never connected, but the workloads name it.
	if _, err := cc.SetAgentMode(ctx, &grapnelpb.SetAgentModeRequest{Agent: "agent_A", Mode: "Maintenance"}); err != nil {
		t.Fatal(err)
	}
	_, index0 := fsmIndex(ts)

	for _, mode := range []string{"Disabled", "Maintenance", "Active"} {
		_, err := cc.SetAgentMode(ctx, &grapnelpb.SetAgentModeRequest{Agent: "agent_a", Mode: mode})
		if status.Code(err) != codes.NotFound || !errors.Is(rpc.FromStatus(err), errs.ErrUnknownAgent) ||
			!strings.Contains(status.Convert(err).Message(), "agent_a") {
			t.Fatalf("%s of an unknown agent: %v", mode, err)
		}
	}
	if _, index := fsmIndex(ts); index != index0 {
		t.Fatalf("a refused mode change wrote entries: index %d, was %d", index, index0)
	}
	ts.store(func(s *state.Store) {
		if _, ok := s.Modes["agent_a"]; ok {
			t.Fatal("a phantom agent got a mode")
		}
	})
	// Once connected, a new agent is known.
	ts.agent("agent_B", nil)
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents["agent_B"] })
		return ok
	}, "agent_B connected")
	if _, err := cc.SetAgentMode(ctx, &grapnelpb.SetAgentModeRequest{Agent: "agent_B", Mode: "Disabled"}); err != nil {
		t.Fatal(err)
	}
}
