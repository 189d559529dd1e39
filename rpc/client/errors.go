package client

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
)

// Sentinel errors; every error this package returns wraps one of them (or
// is a *ServerError, or a context error).
var (
	// ErrNoServer means no address accepted the connection.
	ErrNoServer = errors.New("cannot connect to the server")
	// ErrRejected means the server refused the stream itself: a protocol
	// version it does not support, a malformed hello, or credentials it
	// does not accept. Retrying the same server will not help.
	ErrRejected = errors.New("server rejected the connection")
	// ErrConnectionLost means the stream broke after it was set up.
	ErrConnectionLost = errors.New("connection to the server lost")
	// ErrClosed means the connection was closed by Close.
	ErrClosed = errors.New("connection closed")
	// ErrTimeout means the server did not answer a request in time.
	ErrTimeout = errors.New("no response from the server")
	// ErrHeartbeatLost means the replica's heartbeat stopped: it is dead
	// or cut off, although its TCP connection may look open. It comes
	// wrapped together with ErrConnectionLost.
	ErrHeartbeatLost = errors.New("heartbeat lost")
	// ErrLeaderMoved means the replica a stream was open to leads no more.
	// It comes wrapped together with ErrConnectionLost; the Resolver
	// already knows the new leader, if there is one.
	ErrLeaderMoved = errors.New("leadership moved")
)

// ServerError is a Response{error} from the server: it carries the
// server's message unchanged, because that message is what the user must
// see ("Unsupported API version...", "workload dependency ... cycle").
type ServerError struct {
	Message string
}

func (e *ServerError) Error() string { return e.Message }

// statusText turns a gRPC error into one readable line without the
// "rpc error: code = ... desc =" wrapping.
func statusText(err error) string {
	s, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := strings.TrimSpace(s.Message())
	// "connection error: desc = \"transport: Error while dialing: dial
	// tcp ...: connection refused\"" says it all from "dial tcp" on.
	if i := strings.Index(msg, "dial tcp "); i >= 0 {
		msg = strings.TrimSuffix(msg[i:], "\"")
	}
	if msg == "" {
		msg = s.Code().String()
	}
	return msg
}

// streamError classifies why the stream ended. The status is first read
// back into Grapnel's sentinels (rpc.FromStatus), so a Grapnel server's
// reason is recognised by kind, an upstream one by its code.
func streamError(err error) error {
	if errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrClosed) {
		// Already classified: the stream was ended on purpose.
		return err
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: the server closed the stream", ErrConnectionLost)
	}
	kind := rpc.FromStatus(err)
	switch {
	case errors.Is(kind, errs.ErrUnsupportedProtocol), errors.Is(kind, errs.ErrBadFirstMessage):
		return fmt.Errorf("%w: %s", ErrRejected, statusText(err))
	case errors.Is(kind, errs.ErrPermissionDenied):
		// The credentials were accepted; the role lacks the right, which
		// the text names.
		return fmt.Errorf("%w: %s", ErrRejected, statusText(err))
	case errors.Is(kind, errs.ErrUnauthenticated):
		return fmt.Errorf("%w: credentials not accepted: %s", ErrRejected, statusText(err))
	}
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrRejected, statusText(err))
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%w: credentials not accepted: %s", ErrRejected, statusText(err))
	case codes.Unimplemented:
		return fmt.Errorf("%w: the server does not offer the CLI connection service: %s", ErrRejected, statusText(err))
	case codes.ResourceExhausted:
		// gRPC ends a stream on a message over the limit, sent or
		// received; the text alone does not say what to do.
		return fmt.Errorf("%w: %s (a message may have at most %d bytes: ask for less, e.g. with a narrower field mask)",
			ErrConnectionLost, statusText(err), rpc.MaxMessageBytes)
	}
	return fmt.Errorf("%w: %s", ErrConnectionLost, statusText(err))
}

// dialError classifies why a stream could not be opened to one address.
func dialError(err error) error {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		return streamError(err)
	}
	return errors.New(statusText(err))
}
