package rpc

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// TestCheckProtocolVersion: every rejection, of another major or of a
// version that is not semantic at all, has the text of Ankaios'
// check_version_compatibility (upstream's swdd~common-version-checking~2).
func TestCheckProtocolVersion(t *testing.T) {
	tests := []struct {
		v  string
		ok bool
	}{
		{ProtocolVersion, true},
		{"1.0.1", true},
		{"1.2.3", true},
		{"1.99.0", true},
		{"1.0.0-rc.1", true},
		{"1.0.0-alpha-2.x.7", true},
		{"1.0.0+build.5", true},
		{"1.1.0-beta+exp.sha.5114f85", true},
		{"0.7.0", false},
		{"2.0.0", false},
		{"10.0.0-rc", false},
		{"", false},
		{"1", false},
		{"1.0", false},
		{"v1.0.0", false},
		{"1.0.0.0", false},
		{"01.0.0", false},
		{"1.00.0", false},
		{"1.0.x", false},
		{"1.0.-1", false},
		{"1.0.0-", false},
		{"1.0.0-01", false},
		{"1.0.0-a..b", false},
		{"1.0.0+", false},
		{"1.0.0+b_1", false},
		{" 1.0.0", false},
		{"99999999999999999999.0.0", false},
	}
	for _, tc := range tests {
		t.Run(tc.v, func(t *testing.T) {
			err := CheckProtocolVersion(tc.v)
			if tc.ok {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, errs.ErrUnsupportedProtocol) {
				t.Errorf("%v does not wrap errs.ErrUnsupportedProtocol", err)
			}
			want := "Unsupported protocol version '" + tc.v + "'. Currently supported '1'"
			if err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
			if st := status.Convert(ToStatus(err)); st.Code() != codes.FailedPrecondition || st.Message() != want {
				t.Errorf("status = %v %q, want FailedPrecondition %q", st.Code(), st.Message(), want)
			}
		})
	}
}
