package rpc

import "testing"

func TestRequestIDRouting(t *testing.T) {
	tests := []struct {
		conn, id, prefixed string
	}{
		{"agent_A", "42", "agent_A@42"},
		{"agent_A", "my_wl@123", "agent_A@my_wl@123"},
		{"cli-conn-6f1e", "", "cli-conn-6f1e@"},
		{"", "x", "@x"},
	}
	for _, tc := range tests {
		t.Run(tc.prefixed, func(t *testing.T) {
			got := PrefixRequestID(tc.conn, tc.id)
			if got != tc.prefixed {
				t.Fatalf("PrefixRequestID = %q, want %q", got, tc.prefixed)
			}
			conn, rest, ok := SplitRequestID(got)
			if !ok || conn != tc.conn || rest != tc.id {
				t.Fatalf("SplitRequestID = %q, %q, %v", conn, rest, ok)
			}
		})
	}
	if conn, rest, ok := SplitRequestID("no-prefix"); ok || conn != "no-prefix" || rest != "" {
		t.Fatalf("unprefixed id: %q, %q, %v", conn, rest, ok)
	}
}
