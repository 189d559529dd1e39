package client

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

func TestIsRefusal(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"unauthenticated", rpc.ToStatus(fmt.Errorf("%w: name 'a' not allowed", errs.ErrUnauthenticated)), true},
		{"permission denied", status.Error(codes.PermissionDenied, "no"), true},
		{"protocol", rpc.ToStatus(rpc.CheckProtocolVersion("9.0.0")), true},
		{"bad hello", rpc.ToStatus(errs.ErrBadFirstMessage), true},
		{"too large", rpc.ToStatus(errs.ErrMessageTooLarge), true},
		{"rejected at open", fmt.Errorf("a:1: %w", ErrRejected), true},
		{"redirect", rpc.ToStatus(&errs.NotLeaderError{LeaderID: "r2", LeaderAddress: "a:2"}), false},
		{"leader changed", rpc.ToStatus(errs.ErrLeaderChanged), false},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), false},
		{"heartbeat", fmt.Errorf("%w: %w", ErrConnectionLost, ErrHeartbeatLost), false},
		{"canceled", context.Canceled, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := IsRefusal(tc.err); got != tc.want {
			t.Errorf("%s: IsRefusal(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// The waits after refusals in a row double from 1 s up to 30 s, each a
// random time in the upper half of its step; an accepted stream starts
// over.
func TestRefusalBackoffSteps(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	b := refusalBackoff{clock: clk}
	steps := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	refused := errors.New("refused")
	for round := range 2 {
		for i, d := range steps {
			w := b.refused(refused)
			if w < d/2 || w > d {
				t.Fatalf("round %d, refusal %d: wait %v, want within [%v, %v]", round, i+1, w, d/2, d)
			}
			left, n, last := b.pending()
			if left != w || n != i+1 || last != refused {
				t.Fatalf("pending = %v, %d, %v; want %v, %d, the refusal", left, n, last, w, i+1)
			}
			clk.Advance(w)
		}
		b.accepted()
		if left, n, last := b.pending(); left != 0 || n != 0 || last != nil {
			t.Fatalf("after an acceptance: %v, %d, %v", left, n, last)
		}
	}
}

// wait holds until the clock passes the wait, or ctx ends.
func TestRefusalBackoffWait(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	b := refusalBackoff{clock: clk}
	if err := b.wait(context.Background()); err != nil {
		t.Fatalf("nothing refused, wait: %v", err)
	}
	w := b.refused(errors.New("refused"))
	done := make(chan error, 1)
	go func() { done <- b.wait(context.Background()) }()
	waitPending(t, clk, 1)
	clk.Advance(w - time.Millisecond)
	if clk.Pending() != 1 {
		t.Fatal("the wait ended early")
	}
	clk.Advance(time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once the time had passed")
	}

	b.refused(errors.New("refused"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- b.wait(ctx) }()
	waitPending(t, clk, 1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("wait = %v, want the context's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return on ctx")
	}
	if clk.Pending() != 0 {
		t.Fatal("the timer of a canceled wait was left behind")
	}
}

func waitPending(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	testwait.For(t, 5*time.Second, func() bool { return clk.Pending() == n },
		"%d timers pending (%v are)", n, testwait.Lazy(func() string { return fmt.Sprint(clk.Pending()) }))
}

// A client that reconnects through one Resolver after refusals is held
// back by the refusal backoff, not only an agent: the server sees no new
// stream until the wait has passed; a Dial whose context ends first names
// the last refusal; an accepted stream starts over.
func TestResolverWaitsAfterRefusal(t *testing.T) {
	var (
		streams atomic.Int32
		refuse  atomic.Bool
	)
	refuse.Store(true)
	addr := serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
		streams.Add(1)
		if refuse.Load() {
			return rpc.ToStatus(fmt.Errorf("%w: the certificate does not allow this", errs.ErrUnauthenticated))
		}
		return answerer(1)(s)
	}})
	clk := clock.NewFake(time.Unix(1000, 0))
	r, err := NewResolver(Options{Addrs: []string{addr}, Insecure: true, ResponseTimeout: 5 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	// One attempt: the refusal comes with the first request.
	attempt := func() error {
		c, err := r.Dial(context.Background())
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Request(context.Background(), completeStateReq())
		return err
	}
	if err := attempt(); !errors.Is(err, ErrRejected) {
		t.Fatalf("first attempt: %v, want the refusal", err)
	}
	if wait, n := r.Refused(); n != 1 || wait < refusalMin/2 || wait > refusalMin {
		t.Fatalf("after one refusal: wait %v, %d refusals", wait, n)
	}

	// An Open while the wait runs does not reach the server; when its
	// context ends first (Dial's response timeout) it gives up naming the
	// refusal.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Open(ctx, wire.KindCLI)
		done <- err
	}()
	waitPending(t, clk, 1)
	cancel()
	if err := <-done; !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "does not allow this") {
		t.Fatalf("Open held back and canceled: %v, want ErrRejected naming the last refusal", err)
	}
	if n := streams.Load(); n != 1 {
		t.Fatalf("the server saw %d streams while the client waited, want 1", n)
	}

	// Each refusal in a row waits longer.
	for i := 2; i <= 4; i++ {
		go func() { done <- attempt() }()
		waitPending(t, clk, 1)
		wait, _ := r.Refused()
		clk.Advance(wait)
		if err := <-done; !errors.Is(err, ErrRejected) {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if n := streams.Load(); n != int32(i) {
			t.Fatalf("the server saw %d streams after %d attempts", n, i)
		}
		step := refusalMin << (i - 1)
		if wait, n := r.Refused(); n != i || wait < step/2 || wait > step {
			t.Fatalf("after %d refusals: wait %v, want within [%v, %v] (%d counted)", i, wait, step/2, step, n)
		}
	}

	// The fix arrives; the next attempt is accepted and starts over.
	refuse.Store(false)
	go func() { done <- attempt() }()
	waitPending(t, clk, 1)
	wait, _ := r.Refused()
	clk.Advance(wait)
	if err := <-done; err != nil {
		t.Fatalf("attempt after the fix: %v", err)
	}
	if wait, n := r.Refused(); wait != 0 || n != 0 {
		t.Fatalf("an accepted stream left a wait of %v after %d refusals", wait, n)
	}
}
