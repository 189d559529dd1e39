package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

func TestToStatus(t *testing.T) {
	already := status.Error(codes.NotFound, "gone")
	tests := []struct {
		name    string
		err     error
		code    codes.Code
		message string // substring of the status message
	}{
		{"invalid state", &state.FieldError{Path: "desiredState.workloads.w.runtime", Reason: "missing field"}, codes.InvalidArgument, "desiredState.workloads.w.runtime: missing field"},
		{"wrapped invalid", fmt.Errorf("update: %w", state.ErrInvalid), codes.InvalidArgument, "update: invalid state"},
		{"unsupported protocol", CheckProtocolVersion("2.0.0"), codes.FailedPrecondition, "Unsupported protocol version '2.0.0'. Currently supported '1'"},
		{"bad first message", errs.WithText(errs.ErrBadFirstMessage, "No AgentHello received."), codes.InvalidArgument, "No AgentHello received."},
		// A leader-aware client goes where it is told at once.
		{"not leader", &errs.NotLeaderError{LeaderID: "n2", LeaderAddress: "10.0.0.2:25551"}, codes.FailedPrecondition, "10.0.0.2:25551"},
		{"wrapped not leader", fmt.Errorf("apply: %w", &errs.NotLeaderError{LeaderID: "n2", LeaderAddress: "10.0.0.2:25551"}), codes.FailedPrecondition, "apply: not the leader"},
		// Without an address there is nowhere to go: try again later.
		{"not leader without address", &errs.NotLeaderError{LeaderID: "n2"}, codes.Unavailable, "not the leader"},
		{"not leader sentinel", errs.ErrNotLeader, codes.Unavailable, "not the leader"},
		{"leader changed", fmt.Errorf("%w: reconnect", errs.ErrLeaderChanged), codes.Unavailable, "the leader changed: reconnect"},
		{"unknown replica", errs.WithText(errs.ErrUnknownReplica, `no such replica in the cluster: "r9"`), codes.NotFound, `"r9"`},
		{"quorum", fmt.Errorf("%w: 1 of 3 voters left", errs.ErrQuorum), codes.FailedPrecondition, "1 of 3 voters left"},
		{"no leader", fmt.Errorf("held 5s: %w", errs.ErrNoLeader), codes.Unavailable, "no leader"},
		{"bad snapshot", errs.WithText(errs.ErrBadSnapshot, "snapshot restore: not a valid Grapnel snapshot: checksum mismatch"), codes.InvalidArgument, "checksum mismatch"},
		{"snapshot too large", fmt.Errorf("%w: over 256 MiB", errs.ErrSnapshotTooLarge), codes.ResourceExhausted, "over 256 MiB"},
		{"message too large", fmt.Errorf("%w: ServerHello of 5000000 bytes", errs.ErrMessageTooLarge), codes.ResourceExhausted, "5000000 bytes"},
		{"busy", fmt.Errorf("%w: 1 dry-run is planned and 16 wait", errs.ErrBusy), codes.ResourceExhausted, "16 wait"},
		{"agent not connected", fmt.Errorf("%w: agent \"a\" has no stream", errs.ErrAgentNotConnected), codes.NotFound, "no stream"},
		{"too many streams", fmt.Errorf("%w: agent 'a' holds 4 streams", errs.ErrTooManyStreams), codes.ResourceExhausted, "holds 4 streams"},
		{"shutting down", errs.ErrShuttingDown, codes.Unavailable, "shutting down"},
		{"state changed", fmt.Errorf("%w: expected seq 4, the desired state is at seq 5", errs.ErrStateChanged), codes.FailedPrecondition, "expected seq 4"},
		{"unauthenticated", fmt.Errorf("%w: agent 'a' not in certificate", errs.ErrUnauthenticated), codes.Unauthenticated, "agent 'a'"},
		{"permission denied", fmt.Errorf("%w: agent 'a' may not SnapshotSave: cluster administration needs the operator role", errs.ErrPermissionDenied), codes.PermissionDenied, "needs the operator role"},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "deadline"},
		{"canceled", context.Canceled, codes.Canceled, "canceled"},
		{"already a status", already, codes.NotFound, "gone"},
		{"wrapped status", fmt.Errorf("proxy: %w", status.Error(codes.ResourceExhausted, "full")), codes.ResourceExhausted, "proxy:"},
		{"anything else", errors.New("disk on fire"), codes.Internal, "disk on fire"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ToStatus(tc.err)
			st, ok := status.FromError(got)
			if !ok {
				t.Fatalf("%v is not a status", got)
			}
			if st.Code() != tc.code {
				t.Errorf("code = %v, want %v", st.Code(), tc.code)
			}
			if !strings.Contains(st.Message(), tc.message) {
				t.Errorf("message %q does not contain %q", st.Message(), tc.message)
			}
		})
	}
	if ToStatus(nil) != nil {
		t.Error("nil must stay nil")
	}
	if ToStatus(already) != already {
		t.Error("a status must pass unchanged")
	}
}

// A client reads the sentinels back from the status.
func TestFromStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		is   error
	}{
		{"no leader", errs.ErrNoLeader, errs.ErrNoLeader},
		{"shutting down", errs.ErrShuttingDown, errs.ErrShuttingDown},
		{"unsupported", CheckProtocolVersion("0.1.0"), errs.ErrUnsupportedProtocol},
		{"bad first message", errs.ErrBadFirstMessage, errs.ErrBadFirstMessage},
		{"unauthenticated", errs.ErrUnauthenticated, errs.ErrUnauthenticated},
		{"invalid", &state.FieldError{Path: "p", Reason: "r"}, state.ErrInvalid},
		{"not leader without address", &errs.NotLeaderError{}, errs.ErrNotLeader},
		{"leader changed", errs.ErrLeaderChanged, errs.ErrLeaderChanged},
		{"unknown replica", errs.ErrUnknownReplica, errs.ErrUnknownReplica},
		{"bad snapshot", errs.ErrBadSnapshot, errs.ErrBadSnapshot},
		{"snapshot too large", errs.ErrSnapshotTooLarge, errs.ErrSnapshotTooLarge},
		{"message too large", errs.ErrMessageTooLarge, errs.ErrMessageTooLarge},
		{"busy", errs.ErrBusy, errs.ErrBusy},
		{"agent not connected", errs.ErrAgentNotConnected, errs.ErrAgentNotConnected},
		{"too many streams", errs.ErrTooManyStreams, errs.ErrTooManyStreams},
		// FailedPrecondition with Grapnel's detail is not taken for an
		// upstream version rejection.
		{"quorum", errs.ErrQuorum, errs.ErrQuorum},
		{"state changed", errs.ErrStateChanged, errs.ErrStateChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sent := ToStatus(tc.err)
			got := FromStatus(sent)
			if !errors.Is(got, tc.is) {
				t.Fatalf("FromStatus(%v) = %v, not %v", sent, got, tc.is)
			}
			if status.Code(got) != status.Code(sent) {
				t.Errorf("the status code was lost: %v", status.Code(got))
			}
			if got.Error() != status.Convert(sent).Message() {
				t.Errorf("message = %q, want the status message %q", got.Error(), status.Convert(sent).Message())
			}
			// A proxy may pass the classified error on: it keeps its code.
			if again := ToStatus(got); status.Code(again) != status.Code(sent) {
				t.Errorf("ToStatus(FromStatus) changed the code to %v", status.Code(again))
			}
		})
	}
}

func TestFromStatusNotLeaderRedirect(t *testing.T) {
	sent := ToStatus(fmt.Errorf("write: %w", &errs.NotLeaderError{LeaderID: "n3", LeaderAddress: "[fe80::1]:25551"}))
	var nl *errs.NotLeaderError
	if got := FromStatus(sent); !errors.As(got, &nl) || !errors.Is(got, errs.ErrNotLeader) {
		t.Fatalf("FromStatus = %v, want *errs.NotLeaderError", got)
	}
	if nl.LeaderID != "n3" || nl.LeaderAddress != "[fe80::1]:25551" {
		t.Fatalf("leader = %+v", nl)
	}
}

func TestFromStatusPassesOthers(t *testing.T) {
	plain := errors.New("not a status")
	if FromStatus(plain) != plain || FromStatus(nil) != nil {
		t.Fatal("non-status errors must pass unchanged")
	}
	internal := status.Error(codes.Internal, "x")
	if FromStatus(internal) != internal {
		t.Fatal("an unclassified status must pass unchanged")
	}
	// An upstream Ankaios server sends FailedPrecondition without details.
	upstream := status.Error(codes.FailedPrecondition, "Unsupported protocol version '0.5.0'. Currently supported '1'")
	if got := FromStatus(upstream); !errors.Is(got, errs.ErrUnsupportedProtocol) {
		t.Fatalf("upstream version rejection = %v", got)
	}
	// Unavailable from anyone else (a dead connection) is no redirect.
	if got := FromStatus(status.Error(codes.Unavailable, "connection refused")); errors.Is(got, errs.ErrNotLeader) {
		t.Fatal("plain Unavailable taken for a redirect")
	}
}

func TestNotLeaderError(t *testing.T) {
	e := &errs.NotLeaderError{LeaderID: "n1", LeaderAddress: "a:1"}
	if !errors.Is(e, errs.ErrNotLeader) || errors.Is(e, errs.ErrNoLeader) {
		t.Fatal("Is is wrong")
	}
	if !strings.Contains(e.Error(), "a:1") || (&errs.NotLeaderError{}).Error() != errs.ErrNotLeader.Error() {
		t.Fatalf("messages: %q, %q", e.Error(), (&errs.NotLeaderError{}).Error())
	}
}

func TestWithText(t *testing.T) {
	err := errs.WithText(errs.ErrBadFirstMessage, "No CommanderHello received.")
	if err.Error() != "No CommanderHello received." || !errors.Is(err, errs.ErrBadFirstMessage) {
		t.Fatalf("got %q", err)
	}
}

// Grapnel's own FailedPrecondition answers carry a detail, so a client
// never mistakes them for an upstream protocol rejection (which would make
// it stop for good).
func TestFailedPreconditionKinds(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"not leader", &errs.NotLeaderError{LeaderID: "n2", LeaderAddress: "n2:25551"}},
		{"quorum", errs.ErrQuorum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sent := ToStatus(tc.err)
			if status.Code(sent) != codes.FailedPrecondition {
				t.Fatalf("code = %v", status.Code(sent))
			}
			if got := FromStatus(sent); errors.Is(got, errs.ErrUnsupportedProtocol) {
				t.Fatalf("FromStatus = %v, taken for an unsupported protocol", got)
			}
		})
	}
}
