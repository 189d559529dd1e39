package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/backoff"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
)

// Bounds of the wait after a refusal. A replica that refuses a stream
// (a certificate that does not allow the agent name, a malformed hello, a
// state too large to greet with) refuses the next attempt the same way
// until someone fixes the cause: reconnecting at once made a refused agent
// try 15,000 times and log 31,000 lines in 10 s. The wait doubles from
// refusalMin up to refusalMax, so a fix is picked up within half a minute
// while a refused agent costs the replicas about two attempts a minute.
const (
	refusalMin = time.Second
	refusalMax = 30 * time.Second
)

// IsRefusal reports whether err is a replica's refusal of the stream
// itself (Unauthenticated, PermissionDenied, FailedPrecondition,
// InvalidArgument, ResourceExhausted, Unimplemented, or ErrRejected),
// after which the next attempt waits (see Resolver.Open). A NotLeaderError
// is a redirect, not a refusal.
func IsRefusal(err error) bool {
	if err == nil {
		return false
	}
	var nl *errs.NotLeaderError
	if errors.As(rpc.FromStatus(err), &nl) {
		return false
	}
	if errors.Is(err, ErrRejected) {
		return true
	}
	if _, ok := status.FromError(err); !ok {
		return false
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.FailedPrecondition, codes.InvalidArgument,
		codes.ResourceExhausted, codes.Unimplemented:
		return true
	}
	return false
}

// refusalBackoff spaces the attempts after refusals: after the n-th
// refusal in a row no attempt is made for a random time in [d/2, d], d =
// refusalMin·2ⁿ⁻¹ up to refusalMax, the jitter keeping agents refused
// together (a replaced CA) from coming back in step. A stream on which
// the server sent anything was accepted, which starts over.
type refusalBackoff struct {
	clock clock.Clock

	mu    sync.Mutex // guards the following fields
	n     int        // refusals since the last acceptance
	until time.Time  // no attempt before
	last  error      // the last refusal
}

// refused counts a refusal and returns the wait before the next attempt.
func (b *refusalBackoff) refused(err error) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	wait := backoff.Equal(backoff.Exp(refusalMin, refusalMax, b.n-1), nil)
	b.until = b.clock.Now().Add(wait)
	b.last = err
	return wait
}

// accepted starts over after a stream was accepted.
func (b *refusalBackoff) accepted() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n, b.until, b.last = 0, time.Time{}, nil
}

// pending returns how long the next attempt must still wait, the number
// of refusals in a row, and the last refusal.
func (b *refusalBackoff) pending() (time.Duration, int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.until.Sub(b.clock.Now()), 0), b.n, b.last
}

// wait returns once no refusal holds the next attempt back, or with
// ctx's error.
func (b *refusalBackoff) wait(ctx context.Context) error {
	for {
		d, _, _ := b.pending()
		if d <= 0 {
			return nil
		}
		ch := make(chan struct{})
		t := b.clock.AfterFunc(d, func() { close(ch) })
		select {
		case <-ch:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
