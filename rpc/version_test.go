package rpc

import (
	"errors"
	"testing"
)

func TestCheckProtocolVersion(t *testing.T) {
	tests := []struct {
		v       string
		ok      bool
		message string // exact message for a major mismatch
	}{
		{ProtocolVersion, true, ""},
		{"1.0.1", true, ""},
		{"1.2.3", true, ""},
		{"1.99.0", true, ""},
		{"1.0.0-rc.1", true, ""},
		{"1.0.0-alpha-2.x.7", true, ""},
		{"1.0.0+build.5", true, ""},
		{"1.1.0-beta+exp.sha.5114f85", true, ""},
		{"0.7.0", false, "Unsupported protocol version '0.7.0'. Currently supported '1'"},
		{"2.0.0", false, "Unsupported protocol version '2.0.0'. Currently supported '1'"},
		{"10.0.0-rc", false, "Unsupported protocol version '10.0.0-rc'. Currently supported '1'"},
		{"", false, ""},
		{"1", false, ""},
		{"1.0", false, ""},
		{"v1.0.0", false, ""},
		{"1.0.0.0", false, ""},
		{"01.0.0", false, ""},
		{"1.00.0", false, ""},
		{"1.0.x", false, ""},
		{"1.0.-1", false, ""},
		{"1.0.0-", false, ""},
		{"1.0.0-01", false, ""},
		{"1.0.0-a..b", false, ""},
		{"1.0.0+", false, ""},
		{"1.0.0+b_1", false, ""},
		{" 1.0.0", false, ""},
		{"99999999999999999999.0.0", false, ""},
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
			if !errors.Is(err, ErrUnsupportedProtocol) {
				t.Errorf("%v does not wrap ErrUnsupportedProtocol", err)
			}
			if tc.message != "" && err.Error() != tc.message {
				t.Errorf("message = %q, want %q", err, tc.message)
			}
		})
	}
}
