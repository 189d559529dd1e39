package rpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// errorDomain and the reasons below travel in a google.rpc.ErrorInfo
// detail, so FromStatus never has to parse message text.
const (
	errorDomain       = "grapnel.io"
	metaLeaderID      = "leaderId"
	metaLeaderAddress = "leaderAddress"
)

var sentinelReasons = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{errs.ErrNotLeader, codes.Unavailable, "NOT_LEADER"},
	{errs.ErrNoLeader, codes.Unavailable, "NO_LEADER"},
	{errs.ErrShuttingDown, codes.Unavailable, "SHUTTING_DOWN"},
	{errs.ErrLeaderChanged, codes.Unavailable, "LEADER_CHANGED"},
	{errs.ErrUnknownReplica, codes.NotFound, "UNKNOWN_REPLICA"},
	{errs.ErrNoVoteHold, codes.FailedPrecondition, "NO_VOTE_HOLD"},
	{errs.ErrOtherReplica, codes.InvalidArgument, "OTHER_REPLICA"},
	// Unavailable, as NOT_LEADER: the caller retries (on the next leader).
	{errs.ErrOutcomeUnknown, codes.Unavailable, "OUTCOME_UNKNOWN"},
	{errs.ErrQuorum, codes.FailedPrecondition, "QUORUM"},
	{errs.ErrReleaseBehind, codes.FailedPrecondition, "RELEASE_BEHIND"},
	{errs.ErrAvailability, codes.FailedPrecondition, "AVAILABILITY"},
	{errs.ErrUnsupportedProtocol, codes.FailedPrecondition, "UNSUPPORTED_PROTOCOL"},
	{errs.ErrBadFirstMessage, codes.InvalidArgument, "BAD_FIRST_MESSAGE"},
	{errs.ErrUnauthenticated, codes.Unauthenticated, "UNAUTHENTICATED"},
	{errs.ErrPermissionDenied, codes.PermissionDenied, "PERMISSION_DENIED"},
	{errs.ErrBadSnapshot, codes.InvalidArgument, "BAD_SNAPSHOT"},
	{errs.ErrSnapshotTooLarge, codes.ResourceExhausted, "SNAPSHOT_TOO_LARGE"},
	{errs.ErrMessageTooLarge, codes.ResourceExhausted, "MESSAGE_TOO_LARGE"},
	{errs.ErrTooManyStreams, codes.ResourceExhausted, "TOO_MANY_STREAMS"},
	// ResourceExhausted, as gRPC's own refusals for want of room: the
	// caller may retry after a while, not at once.
	{errs.ErrBusy, codes.ResourceExhausted, "BUSY"},
	{errs.ErrStateChanged, codes.FailedPrecondition, "STATE_CHANGED"},
	{errs.ErrAgentNotConnected, codes.NotFound, "AGENT_NOT_CONNECTED"},
	{errs.ErrUnknownAgent, codes.NotFound, "UNKNOWN_AGENT"},
	{errs.ErrNoSuchTransaction, codes.NotFound, "NO_SUCH_TRANSACTION"},
	// Both are the state of the cluster refusing the call until it
	// changes (the lock is released or expires; the caller reads again),
	// not a conflict a blind retry resolves, hence FailedPrecondition,
	// as STATE_CHANGED, rather than Aborted (docs/locks.md).
	{errs.ErrLocked, codes.FailedPrecondition, "LOCKED"},
	{errs.ErrRevisionConflict, codes.FailedPrecondition, "REVISION_CONFLICT"},
	{state.ErrInvalid, codes.InvalidArgument, "INVALID"},
}

// ErrorReasons lists the ErrorInfo reasons Grapnel's errors carry, in
// the table's order (internal/formats lists them in --version).
func ErrorReasons() []string {
	out := make([]string, len(sentinelReasons))
	for i, s := range sentinelReasons {
		out[i] = s.reason
	}
	return out
}

// ToStatus maps an error to a gRPC status error; it is the one place where
// Grapnel's errors get their codes. The message is err.Error(), so upstream
// wording reaches the client unchanged. A status error passes through as it
// is; an error nobody classified becomes Internal.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	var nl *errs.NotLeaderError
	if errors.As(err, &nl) {
		meta := map[string]string{metaLeaderID: nl.LeaderID, metaLeaderAddress: nl.LeaderAddress}
		code := codes.FailedPrecondition
		if nl.LeaderAddress == "" {
			code = codes.Unavailable
		}
		return withInfo(code, err.Error(), "NOT_LEADER", meta)
	}
	for _, s := range sentinelReasons {
		if errors.Is(err, s.err) {
			return withInfo(s.code, err.Error(), s.reason, nil)
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	if st, ok := status.FromError(err); ok {
		return status.Error(st.Code(), err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func withInfo(code codes.Code, msg, reason string, meta map[string]string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

// FromStatus turns a status error received by a client back into
// Grapnel's errors: a NOT_LEADER detail naming a leader gives a
// *errs.NotLeaderError,
// the other sentinels an error that errors.Is matches and that still
// carries the status. A FailedPrecondition without details (an upstream
// server) is taken as errs.ErrUnsupportedProtocol, the only use Ankaios makes of
// that code. Anything else is returned unchanged.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		if info.GetReason() == "NOT_LEADER" && info.GetMetadata()[metaLeaderAddress] != "" {
			return &errs.NotLeaderError{LeaderID: info.GetMetadata()[metaLeaderID], LeaderAddress: info.GetMetadata()[metaLeaderAddress]}
		}
		for _, s := range sentinelReasons {
			if s.reason == info.GetReason() {
				return &statusError{kind: s.err, st: err, msg: st.Message()}
			}
		}
	}
	if st.Code() == codes.FailedPrecondition {
		return &statusError{kind: errs.ErrUnsupportedProtocol, st: err, msg: st.Message()}
	}
	return err
}

// statusError is a received status classified as one of the sentinels.
type statusError struct {
	kind error
	st   error
	msg  string
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) Unwrap() []error { return []error{e.kind, e.st} }
