package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/metrics"
)

// tlsOpen opens an Ankaios stream of kind to addr over mutual TLS with
// the client files f, sending nothing.
func tlsOpen(t *testing.T, addr string, f rpc.TLSFiles, kind wire.Kind, md ...string) (rawClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := kind.Open(ctx, tlsConn(t, addr, f))
	if err != nil {
		t.Fatal(err)
	}
	return st, cancel
}

// tooMany fails unless err is RESOURCE_EXHAUSTED, errs.ErrTooManyStreams
// for a Grapnel client, with every one of words in its message.
func tooMany(t *testing.T, err error, words ...string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(rpc.FromStatus(err), errs.ErrTooManyStreams) {
		t.Fatalf("err = %v, want RESOURCE_EXHAUSTED (too many streams)", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("refusal %q does not name %q", err, w)
		}
	}
}

// Requirement (issue 27, hole 7): a stream that sends no hello ends at
// the hello deadline (on the server's clock) with INVALID_ARGUMENT naming
// the hello it waited for, and is counted; one that says hello in time
// is served.
func TestStreamWithoutHelloEndsAtTheDeadline(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	set := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock, c.Metrics = fake, set })
	for _, tc := range []struct {
		kind  wire.Kind
		hello string
	}{{wire.KindAgent, "AgentHello"}, {wire.KindCLI, "CommanderHello"}, {wire.KindCommand, "CommanderHello"}} {
		st := rawStream(t, ts.addr, tc.kind)
		testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(DefaultHelloTimeout) > 0 }, "the hello timer")
		fake.Advance(DefaultHelloTimeout)
		err := streamEnd(t, st, 10*time.Second)
		if status.Code(err) != codes.InvalidArgument || !errors.Is(rpc.FromStatus(err), errs.ErrBadFirstMessage) ||
			!strings.Contains(err.Error(), "no "+tc.hello+" within 10s") {
			t.Fatalf("%v stream: err = %v, want INVALID_ARGUMENT: no %s within 10s", tc.kind, err, tc.hello)
		}
	}
	if want := `grapnel_streams_refused_total{reason="no_hello",role="none"} 3`; !strings.Contains(metricsText(t, set), want) {
		t.Fatalf("metrics lack %s:\n%s", want, metricsText(t, set))
	}
	// In time: served, and the stopped timer ends nothing later.
	cli := ts.cli()
	cli.get() // the hello was taken
	fake.Advance(DefaultHelloTimeout)
	if cs := cli.get(); cs == nil {
		t.Fatal("the CLI stream stopped answering after the hello deadline passed")
	}
	if total, _ := ts.srv.streams.open(identity.Insecure); total != 1 {
		t.Fatalf("%d streams counted, want the CLI's 1", total)
	}
}

// Requirement (issue 27, hole 7): the streams one identity holds open on
// a replica are capped (agents low, other roles higher), and so are all
// streams together: one over a cap is refused with RESOURCE_EXHAUSTED
// naming the identity and the cap, logged and counted, while other
// identities are served. A stream a follower proxies counts at the
// leader as the client's, not the follower's. A stream that ends frees
// its place.
func TestStreamsAreCappedPerIdentity(t *testing.T) {
	c := startRolesCluster(t, func(cfg *Config) {
		cfg.StreamLimits = StreamLimits{PerAgent: 2, PerClient: 3, Total: 7}
		cfg.HelloTimeout = time.Hour // streams held without a hello stay until the test ends them
	})
	agentB := c.ca.IssueIdentity(t, "agent-b", identity.Agent, "agent_B", "agent_B")
	l, f := c.l, c.f
	agentA := identity.Identity{Role: identity.Agent, Name: "agent_A", Typed: true}
	counted := func(r *replica, id identity.Identity, want int) {
		t.Helper()
		testwait.For(t, 10*time.Second, func() bool { _, n := r.srv.streams.open(id); return n == want },
			"%s holding %d streams on %s", id, want, r.id)
	}

	// agent_A: two streams without a hello at the leader (an untyped
	// certificate naming agent_A is the same identity), the third refused.
	_, cancelFirst := tlsOpen(t, l.addr, c.agentA, wire.KindAgent)
	tlsOpen(t, l.addr, c.untypedA, wire.KindAgent)
	counted(l, agentA, 2)
	st, _ := tlsOpen(t, l.addr, c.agentA, wire.KindAgent)
	tooMany(t, streamEnd(t, st, 10*time.Second), "agent 'agent_A' holds 2 Ankaios streams", "--max-streams-per-agent")
	// Through a follower: the leader counts the forwarded agent_A.
	st = tlsAgentStream(t, f.addr, c.agentA, "agent_A")
	tooMany(t, streamEnd(t, st, 10*time.Second), "agent 'agent_A'")
	// Another agent is served.
	st = tlsAgentStream(t, l.addr, agentB, "agent_B")
	if m, err := st.Recv(); err != nil || m.GetServerHello() == nil {
		t.Fatalf("agent_B: %v, %v; want its ServerHello", m, err)
	}

	// The operator: three CLI streams, the fourth refused.
	alice := identity.Identity{Role: identity.Operator, Name: "alice", Typed: true}
	for range 3 {
		tlsStream(t, l.addr, c.operator, wire.KindCLI, commanderHello(rpc.ProtocolVersion))
	}
	counted(l, alice, 3)
	st = tlsStream(t, l.addr, c.operator, wire.KindCLI, commanderHello(rpc.ProtocolVersion))
	tooMany(t, streamEnd(t, st, 10*time.Second), "operator 'alice' holds 3", "--max-streams-per-client")

	// 2 + 1 + 3 = 6; the commander takes the seventh place, then every
	// identity is refused by the replica's total.
	tlsStream(t, l.addr, c.commander, wire.KindCommand, commanderHello(rpc.ProtocolVersion))
	counted(l, identity.Identity{Role: identity.Commander, Name: "ota", Typed: true}, 1)
	st = tlsStream(t, l.addr, c.commander, wire.KindCommand, commanderHello(rpc.ProtocolVersion))
	tooMany(t, streamEnd(t, st, 10*time.Second), "this replica holds 7 Ankaios streams", "--max-streams")

	// A stream that ends frees its place.
	cancelFirst()
	counted(l, agentA, 1)
	st = tlsAgentStream(t, l.addr, c.agentA, "agent_A")
	if m, err := st.Recv(); err != nil || m.GetServerHello() == nil {
		t.Fatalf("agent_A after one of its streams ended: %v, %v; want its ServerHello", m, err)
	}

	out := metricsText(t, c.metrics)
	for _, want := range []string{
		`grapnel_streams_refused_total{reason="identity_cap",role="agent"} 2`,
		`grapnel_streams_refused_total{reason="identity_cap",role="operator"} 1`,
		`grapnel_streams_refused_total{reason="total_cap",role="commander"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The counter's own rules: no identity (no TLS) meets only the total;
// releasing twice frees one place.
func TestStreamCounter(t *testing.T) {
	c := newStreamCounter(StreamLimits{PerAgent: 1, PerClient: 1, Total: 3})
	agent := identity.Identity{Role: identity.Agent, Name: "a", Typed: true}
	rel, _, err := c.admit(agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, why, err := c.admit(agent); !errors.Is(err, errs.ErrTooManyStreams) || why != refusedIdentityCap {
		t.Fatalf("second agent stream: %v (%s)", err, why)
	}
	for range 2 {
		if _, _, err := c.admit(identity.Insecure); err != nil {
			t.Fatalf("insecure stream under the total: %v", err)
		}
	}
	if _, why, err := c.admit(identity.Insecure); !errors.Is(err, errs.ErrTooManyStreams) || why != refusedTotalCap {
		t.Fatalf("insecure stream over the total: %v (%s)", err, why)
	}
	rel()
	rel()
	if total, n := c.open(agent); total != 2 || n != 0 {
		t.Fatalf("after a double release: total %d, agent %d; want 2 and 0", total, n)
	}
	if _, _, err := c.admit(agent); err != nil {
		t.Fatalf("agent after its stream ended: %v", err)
	}
	if _, _, err := c.admit(identity.Insecure); !errors.Is(err, errs.ErrTooManyStreams) {
		t.Fatal("the double release freed two places")
	}
}
