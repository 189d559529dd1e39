package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// A stream that arrives while the cluster has no leader yet (one of three
// replicas up) is held, not failed, and served once the others come and a
// leader is elected.
func TestHoldUntilALeaderIsElected(t *testing.T) {
	rs := newReplicaSet(t, 3, 20*time.Second)
	first := rs.reps[0]
	first.start()

	st := rawStream(t, first.addr, wire.KindCLI)
	if err := st.Send(commanderHello(rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{
		RequestId: "held", RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}}}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		m, err := st.Recv()
		if err == nil && m.GetResponse().GetRequestId() != "held" {
			err = errors.New("unexpected first message")
		}
		answered <- err
	}()
	// Nothing can be elected with one voter of three; the stream waits.
	select {
	case err := <-answered:
		t.Fatalf("answered without a leader: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if id, _, _ := first.node.LeaderInfo(); id != "" {
		t.Fatalf("a leader %s already", id)
	}
	for _, r := range rs.reps[1:] {
		r.start()
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("held stream: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held stream was never served")
	}
}

// With no leader in sight the hold ends after HoldTimeout with a clear "no
// leader" error (Unavailable), for streams, leader-only cluster calls and
// the leader-aware client alike.
func TestHoldExpiresWithoutALeader(t *testing.T) {
	const hold = 300 * time.Millisecond
	rs := newReplicaSet(t, 3, hold)
	lone := rs.reps[0]
	lone.start()

	check := func(t *testing.T, err error, elapsed time.Duration) {
		t.Helper()
		if status.Code(err) != codes.Unavailable || !errors.Is(rpc.FromStatus(err), errs.ErrNoLeader) {
			t.Fatalf("err = %v, want Unavailable NO_LEADER", err)
		}
		if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "no leader: ") || !strings.Contains(msg, "waited "+hold.String()) {
			t.Fatalf("message %q does not say it waited %v for a leader", msg, hold)
		}
		if elapsed < hold {
			t.Fatalf("failed after %v, before the hold of %v", elapsed, hold)
		}
	}
	for kind, name := range map[wire.Kind]string{wire.KindAgent: "agent stream", wire.KindCLI: "cli stream", wire.KindCommand: "command stream"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			st := rawStream(t, lone.addr, kind)
			check(t, streamEnd(t, st, 10*hold), time.Since(start))
		})
	}
	t.Run("leader-only cluster call", func(t *testing.T) {
		start := time.Now()
		_, err := grapnelpb.NewClusterClient(dialRaw(t, lone.addr)).RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: "rs-2"})
		check(t, err, time.Since(start))
	})
	t.Run("status answers at once", func(t *testing.T) {
		st, err := grapnelpb.NewClusterClient(dialRaw(t, lone.addr)).Status(context.Background(), &grapnelpb.StatusRequest{})
		if err != nil || st.GetLeaderId() != "" || st.GetReplicaId() != lone.id {
			t.Fatalf("status %v, %v", st, err)
		}
	})
	t.Run("leader-aware client", func(t *testing.T) {
		_, err := client.Dial(context.Background(), client.Options{Addrs: []string{lone.addr}, Insecure: true, ResponseTimeout: 10 * hold})
		if !errors.Is(err, client.ErrNoServer) || !errors.Is(err, errs.ErrNoLeader) {
			t.Fatalf("err = %v, want ErrNoServer and ErrNoLeader", err)
		}
	})
}

// The hold is measured on the server's clock, not the wall clock: with a
// fake clock nothing expires until the clock is moved.
func TestHoldRunsOnTheServersClock(t *testing.T) {
	const hold = time.Hour
	rs := newReplicaSet(t, 3, hold)
	fake := clock.NewFake(time.Unix(0, 0))
	rs.clk = fake
	lone := rs.reps[0]
	lone.start()
	st := rawStream(t, lone.addr, wire.KindCLI)
	if err := st.Send(commanderHello(rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(hold) > 0 }, "the hold's timer")
	fake.Advance(hold)
	err := streamEnd(t, st, 10*time.Second)
	if !errors.Is(rpc.FromStatus(err), errs.ErrNoLeader) || !strings.Contains(err.Error(), "waited 1h0m0s") {
		t.Fatalf("err = %v, want no leader after the fake hour", err)
	}
}

// A held stream ends at once when the replica shuts down.
func TestHoldEndsOnShutdown(t *testing.T) {
	rs := newReplicaSet(t, 3, time.Minute)
	lone := rs.reps[0]
	lone.start()
	st := rawStream(t, lone.addr, wire.KindCLI)
	if err := st.Send(commanderHello(rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, lone.srv.Shutdown)
	err := streamEnd(t, st, 10*time.Second)
	if status.Code(err) != codes.Unavailable || !errors.Is(rpc.FromStatus(err), errs.ErrShuttingDown) {
		t.Fatalf("err = %v, want Unavailable SHUTTING_DOWN", err)
	}
}

// A hold that waits for this replica's term goes on as soon as the term
// opens (Server.terms), not at a re-check: a replica's first answer after
// power-on waited up to a re-check for it.
func TestHoldGoesOnWhenTheTermOpens(t *testing.T) {
	ts := startServer(t, nil)
	s := ts.srv
	var open atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- holdFor(context.Background(), s.node, clock.Real(), time.Minute, s.shutdownCh, s.terms,
			func() bool { return open.Load() })
	}()
	testwait.For(t, 10*time.Second, func() bool { return s.terms.Subscribers() > 0 }, "the hold to subscribe to the term feed")
	open.Store(true)
	s.terms.Notify()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hold did not go on when the term opened")
	}
}
