package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// A handler returns a plain error; the interceptors give it the status
// ToStatus gives, with its ErrorInfo detail, and leave success alone.
func TestStatusInterceptors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"success", nil, codes.OK, ""},
		{"quorum", fmt.Errorf("%w: 1 of 3 voters left", errs.ErrQuorum), codes.FailedPrecondition, "QUORUM"},
		{"not leader, leader known", &errs.NotLeaderError{LeaderID: "n2", LeaderAddress: "a:1"}, codes.FailedPrecondition, "NOT_LEADER"},
		{"a status passes", status.Error(codes.Aborted, "leader said so"), codes.Aborted, ""},
		{"unclassified", errors.New("disk on fire"), codes.Internal, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, uerr := UnaryStatus(context.Background(), "req", &grpc.UnaryServerInfo{},
				func(context.Context, any) (any, error) { return "resp", tc.err })
			if resp != "resp" {
				t.Errorf("response = %v", resp)
			}
			serr := StreamStatus(nil, nil, &grpc.StreamServerInfo{}, func(any, grpc.ServerStream) error { return tc.err })
			for _, got := range []error{uerr, serr} {
				st := status.Convert(got)
				if st.Code() != tc.code {
					t.Fatalf("code = %v, want %v (%v)", st.Code(), tc.code, got)
				}
				if tc.err != nil && st.Message() != status.Convert(ToStatus(tc.err)).Message() {
					t.Errorf("message = %q", st.Message())
				}
				var reason string
				for _, d := range st.Details() {
					if info, ok := d.(*errdetails.ErrorInfo); ok {
						reason = info.GetReason()
					}
				}
				if reason != tc.reason {
					t.Errorf("reason = %q, want %q", reason, tc.reason)
				}
			}
		})
	}
}
