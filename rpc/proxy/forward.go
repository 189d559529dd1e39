package proxy

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
)

// Forward copies the client's stream down to a stream to the leader that
// open creates, both ways, until either side ends, and returns:
//   - nil when the leader ended its stream cleanly;
//   - the leader's status error, unchanged, when it ended it with one (the
//     caller returns it, so the client sees exactly what the leader said);
//   - the client's error when the client went away first;
//   - the error of open.
//
// open gets a context that Forward cancels when it returns; cancelling
// ctx ends the forwarding (the caller's way to end a proxied stream when
// leadership moves). A client that half-closes its side gets the leader's
// side half-closed too, and Forward waits for the leader to finish.
//
// Forward starts two goroutines. The one copying leader→client ends before
// Forward returns. The one copying client→leader may still be blocked
// reading the client's stream when Forward returns; it ends as soon as
// the server handler returns, which ends that stream.
func Forward[Req, Resp any](ctx context.Context, down grpc.BidiStreamingServer[Req, Resp],
	open func(context.Context) (grpc.BidiStreamingClient[Req, Resp], error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := open(ctx)
	if err != nil {
		return err
	}

	upDone := make(chan error, 1)
	go func() {
		for {
			m, err := up.Recv()
			if err != nil {
				upDone <- err
				return
			}
			if err := down.Send(m); err != nil {
				upDone <- errClientGone{err}
				return
			}
		}
	}()

	downDone := make(chan error, 1)
	go func() {
		for {
			m, err := down.Recv()
			if errors.Is(err, io.EOF) {
				_ = up.CloseSend()
				return
			}
			if err != nil {
				downDone <- err
				return
			}
			if err := up.Send(m); err != nil {
				// The leader's side is over; its Recv reports why.
				return
			}
		}
	}()

	select {
	case err := <-upDone:
		var gone errClientGone
		if errors.As(err, &gone) {
			return gone.err
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case err := <-downDone:
		cancel()
		<-upDone
		return err
	case <-ctx.Done():
		cancel()
		<-upDone
		return ctx.Err()
	}
}

// errClientGone marks a failed send to the client, so that it is not taken
// for the leader's verdict.
type errClientGone struct{ err error }

func (e errClientGone) Error() string { return e.err.Error() }
