package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// The streaming commands (get workloads --watch, get events, logs -f) are
// what an operator runs during a failover, so they follow the leader as
// the agent does instead of ending with the stream: when the stream ends
// (the leader died, stepped down or was cut off) the command reconnects
// to the new leader through Session.Reconnect, says so on stderr, and
// takes up where it was. It ends only on Ctrl-C, or when no replica took
// the stream again within the response timeout.

// resumeRetry spaces two attempts to reconnect that failed at once (the
// replica named as leader refused the hello while stepping down); the
// Resolver itself waits for an election.
const resumeRetry = 50 * time.Millisecond

// replicaNamer is implemented by a connection that knows the id of the
// replica it is open to (*client.Conn).
type replicaNamer interface{ ReplicaID() string }

// addresser is implemented by a connection that knows its address.
type addresser interface{ Addr() string }

// connName names the replica c is open to in the resume notice: its id,
// else its address.
func connName(c Conn) string {
	if n, ok := c.(replicaNamer); ok && n.ReplicaID() != "" {
		return n.ReplicaID()
	}
	if a, ok := c.(addresser); ok {
		return a.Addr()
	}
	return "the server"
}

// resume replaces s.Conn, whose stream ended under a streaming command,
// with a new connection to the leader, and prints the notice line
// "leader changed: s1 -> s2; resumed" on stderr. It tries until one
// attempt succeeds, for at most the response timeout; then, or without
// Reconnect, it returns why the stream ended. The caller asks again for
// what ran on the old stream. A ctx that ended returns ctx.Err().
func (s *Session) resume(ctx context.Context) error {
	lost := s.connErr()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.Reconnect == nil {
		return lost
	}
	from := connName(s.Conn)
	s.debugf("the stream to %s ended: %v; reconnecting", from, lost)
	rctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	var (
		c   Conn
		err error
	)
	for {
		if c, err = s.Reconnect(rctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rctx.Err() != nil || errors.Is(err, client.ErrRejected) {
			return fmt.Errorf("%w; no replica took the stream again within %v: %w", lost, s.timeout(), err)
		}
		t := clock.NewTimer(s.clock(), resumeRetry)
		select {
		case <-rctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if old, ok := s.Conn.(io.Closer); ok {
		_ = old.Close()
	}
	s.Conn = c
	to := connName(c)
	if to == from {
		fmt.Fprintf(s.Err, "connection to %s lost; resumed\n", from)
	} else {
		fmt.Fprintf(s.Err, "leader changed: %s -> %s; resumed\n", from, to)
	}
	return nil
}

// streamEnded reports whether err, from a request of a streaming command,
// came because the stream ended, which resume mends.
func (s *Session) streamEnded(err error) bool {
	return err != nil && s.Conn.Err() != nil
}
