package bench

import (
	"errors"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestRuntimeConfig(t *testing.T) {
	tests := []struct{ n, seq int }{
		{MinPayload, 1}, {MinPayload, 123456789}, {256, 0}, {256, 42}, {1024, 7},
	}
	for _, tt := range tests {
		rc := RuntimeConfig(tt.n, tt.seq)
		if len(rc) != tt.n {
			t.Fatalf("RuntimeConfig(%d, %d) has %d bytes", tt.n, tt.seq, len(rc))
		}
		var v map[string]any
		if err := yaml.Unmarshal([]byte(rc), &v); err != nil || v["image"] != "bench" {
			t.Fatalf("RuntimeConfig(%d, %d) = %q is not the YAML it should be: %v", tt.n, tt.seq, rc, err)
		}
		if got, ok := ParseSeq(rc); !ok || got != tt.seq {
			t.Fatalf("ParseSeq(RuntimeConfig(%d, %d)) = %d, %v", tt.n, tt.seq, got, ok)
		}
	}
	for _, rc := range []string{"", "image: x\n", "seq: abc\n"} {
		if _, ok := ParseSeq(rc); ok {
			t.Fatalf("ParseSeq(%q) found a seq", rc)
		}
	}
}

func TestNewWriterChecksItsSettings(t *testing.T) {
	tests := []struct {
		name     string
		addrs    []string
		workload string
		payload  int
	}{
		{"no address", nil, "w", 256},
		{"payload too small", []string{"127.0.0.1:1"}, "w", MinPayload - 1},
		{"bad workload name", []string{"127.0.0.1:1"}, "a.b", 256},
		{"empty workload name", []string{"127.0.0.1:1"}, "", 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewWriter(tt.addrs, tt.workload, tt.payload, time.Second); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("err %v, want ErrBadConfig", err)
			}
		})
	}
	if _, err := NewWriter([]string{"127.0.0.1:1"}, "bench_c000", 256, time.Second); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
}
