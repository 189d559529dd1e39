package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/state"
)

// ErrNotLeader is returned by a replica that is not the Raft leader for
// work only the leader does. Returned as a *NotLeaderError when the leader
// is known, so that the caller can go there directly.
var ErrNotLeader = errors.New("not the leader")

// ErrNoLeader means the cluster has no leader right now (an election is
// running or quorum is lost); retrying later may succeed.
var ErrNoLeader = errors.New("no leader")

// ErrUnsupportedProtocol means the peer speaks an Ankaios protocol version
// whose major differs from ProtocolVersion. Clients stop instead of
// reconnecting when they see it.
var ErrUnsupportedProtocol = errors.New("unsupported protocol version")

// ErrBadFirstMessage means a stream did not open with the hello message its
// service expects (AgentHello or CommanderHello).
var ErrBadFirstMessage = errors.New("bad first message")

// ErrUnauthenticated means the peer's certificate does not allow what it
// asked for, e.g. an agent name missing from the certificate's SAN.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrShuttingDown means the replica is stopping; the caller should use
// another one.
var ErrShuttingDown = errors.New("shutting down")

// ErrLeaderChanged ends a stream that a follower proxied to the leader
// when leadership moves: the client reconnects, as after a failover.
var ErrLeaderChanged = errors.New("the leader changed")

// ErrUnknownReplica names a replica that is not in the cluster.
var ErrUnknownReplica = errors.New("no such replica")

// ErrQuorum refuses an operator action that would leave the cluster
// without a quorum of voters.
var ErrQuorum = errors.New("the action would lose the quorum")

// ErrBadSnapshot refuses a snapshot restore whose upload is not a
// complete, undamaged Grapnel snapshot; nothing was changed.
var ErrBadSnapshot = errors.New("not a valid Grapnel snapshot")

// ErrSnapshotTooLarge refuses a snapshot upload over the replica's size
// cap; nothing was changed.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// ErrMessageTooLarge means a message would exceed MaxMessageBytes, which
// gRPC would refuse on either side; the server answers with it instead.
var ErrMessageTooLarge = errors.New("message too large")

// NotLeaderError is ErrNotLeader with the leader this replica sees, so a
// client can redirect without asking around. With a LeaderAddress it maps
// to FailedPrecondition ("not here, go there"); without one to
// Unavailable, as the bare ErrNotLeader ("try again later"). Only
// leader-aware clients get it: an unmodified Ankaios client stops for good
// on FailedPrecondition, so a follower proxies those instead.
type NotLeaderError struct {
	LeaderID      string
	LeaderAddress string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderAddress == "" {
		return ErrNotLeader.Error()
	}
	return fmt.Sprintf("%s; the leader is %s at %s", ErrNotLeader, e.LeaderID, e.LeaderAddress)
}

// Is makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// WithText returns an error that is kind for errors.Is but reads exactly
// text, for messages that must keep the upstream wording.
func WithText(kind error, text string) error { return &textError{kind: kind, text: text} }

type textError struct {
	kind error
	text string
}

func (e *textError) Error() string { return e.text }
func (e *textError) Unwrap() error { return e.kind }

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
	{ErrNotLeader, codes.Unavailable, "NOT_LEADER"},
	{ErrNoLeader, codes.Unavailable, "NO_LEADER"},
	{ErrShuttingDown, codes.Unavailable, "SHUTTING_DOWN"},
	{ErrLeaderChanged, codes.Unavailable, "LEADER_CHANGED"},
	{ErrUnknownReplica, codes.NotFound, "UNKNOWN_REPLICA"},
	{ErrQuorum, codes.FailedPrecondition, "QUORUM"},
	{ErrUnsupportedProtocol, codes.FailedPrecondition, "UNSUPPORTED_PROTOCOL"},
	{ErrBadFirstMessage, codes.InvalidArgument, "BAD_FIRST_MESSAGE"},
	{ErrUnauthenticated, codes.Unauthenticated, "UNAUTHENTICATED"},
	{ErrBadSnapshot, codes.InvalidArgument, "BAD_SNAPSHOT"},
	{ErrSnapshotTooLarge, codes.ResourceExhausted, "SNAPSHOT_TOO_LARGE"},
	{ErrMessageTooLarge, codes.ResourceExhausted, "MESSAGE_TOO_LARGE"},
	{state.ErrInvalid, codes.InvalidArgument, "INVALID"},
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
	var nl *NotLeaderError
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
// *NotLeaderError,
// the other sentinels an error that errors.Is matches and that still
// carries the status. A FailedPrecondition without details (an upstream
// server) is taken as ErrUnsupportedProtocol, the only use Ankaios makes of
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
			return &NotLeaderError{LeaderID: info.GetMetadata()[metaLeaderID], LeaderAddress: info.GetMetadata()[metaLeaderAddress]}
		}
		for _, s := range sentinelReasons {
			if s.reason == info.GetReason() {
				return &statusError{kind: s.err, st: err, msg: st.Message()}
			}
		}
	}
	if st.Code() == codes.FailedPrecondition {
		return &statusError{kind: ErrUnsupportedProtocol, st: err, msg: st.Message()}
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
