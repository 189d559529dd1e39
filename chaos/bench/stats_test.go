package bench

import (
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	twenty := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"median of five is the third", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p99 of 20 is the maximum", twenty, 99, 20 * time.Millisecond},
		{"p50 of 20 is the tenth", twenty, 50, 10 * time.Millisecond},
		{"p99 of 100 is the 99th", hundred, 99, 99 * time.Millisecond},
		{"p100 is the maximum", hundred, 100, 100 * time.Millisecond},
		{"tiny p is the minimum", hundred, 0.001, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name     string
		sample   Sample
		opsPerS  float64
		p50, p99 time.Duration
	}{
		{
			name: "unsorted latencies over two seconds",
			sample: Sample{System: "x", Clients: 2, Errors: 1, FirstError: "boom", ElapsedNs: int64(2 * time.Second),
				LatenciesNs: []int64{int64(4 * time.Millisecond), int64(1 * time.Millisecond), int64(3 * time.Millisecond), int64(2 * time.Millisecond)}},
			opsPerS: 2, p50: 2 * time.Millisecond, p99: 4 * time.Millisecond,
		},
		{
			name:   "no time elapsed gives no rate",
			sample: Sample{System: "x", Clients: 1, LatenciesNs: []int64{5}},
			p50:    5, p99: 5,
		},
		{
			name:   "nothing acknowledged",
			sample: Sample{System: "x", Clients: 1, Errors: 3, ElapsedNs: int64(time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.sample)
			if s.OpsPerSec != tt.opsPerS || s.P50 != tt.p50 || s.P99 != tt.p99 {
				t.Fatalf("got %.2f ops/s p50 %v p99 %v, want %.2f, %v, %v", s.OpsPerSec, s.P50, s.P99, tt.opsPerS, tt.p50, tt.p99)
			}
			if s.Ops != len(tt.sample.LatenciesNs) || s.Errors != tt.sample.Errors || s.FirstError != tt.sample.FirstError || s.Clients != tt.sample.Clients {
				t.Fatalf("counts not carried over: %+v", s)
			}
		})
	}
}
