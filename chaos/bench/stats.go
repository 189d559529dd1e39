package bench

import (
	"math"
	"slices"
	"time"
)

// Sample is the raw outcome of one load run: every latency of an
// acknowledged operation, and how many failed. The etcd load client
// (chaos/etcdpeer/cmd/etcdload) writes the same JSON fields, so both
// systems' figures come from one piece of code (Summarize).
type Sample struct {
	System      string  `json:"system"`
	Clients     int     `json:"clients"`
	Ops         int     `json:"ops"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"firstError,omitempty"`
	ElapsedNs   int64   `json:"elapsedNs"`
	LatenciesNs []int64 `json:"latenciesNs"`
	// AllOps counts every operation issued, the set-up's and warm-up's
	// included: what the servers' disk writes over the run are divided by.
	AllOps int `json:"allOps"`
}

// Summary is what a table shows of a Sample.
type Summary struct {
	System     string
	Clients    int
	Ops        int
	Errors     int
	FirstError string
	Elapsed    time.Duration
	OpsPerSec  float64
	P50, P99   time.Duration
	Max        time.Duration
	// DiskPerOp is the bytes all servers caused to be written to storage
	// per operation over the run (/proc/PID/io), zero when not measured.
	DiskPerOp float64
}

// Summarize computes throughput (acknowledged operations per second of the
// measured phase) and latency percentiles of a sample.
func Summarize(s Sample) Summary {
	d := make([]time.Duration, len(s.LatenciesNs))
	for i, ns := range s.LatenciesNs {
		d[i] = time.Duration(ns)
	}
	slices.Sort(d)
	sum := Summary{
		System: s.System, Clients: s.Clients, Ops: len(d), Errors: s.Errors, FirstError: s.FirstError,
		Elapsed: time.Duration(s.ElapsedNs),
		P50:     Percentile(d, 50), P99: Percentile(d, 99), Max: Percentile(d, 100),
	}
	if sum.Elapsed > 0 {
		sum.OpsPerSec = float64(len(d)) / sum.Elapsed.Seconds()
	}
	return sum
}

// SummarizeWithDisk is Summarize with the servers' disk writes over the
// run (written bytes) spread over every operation of the sample.
func SummarizeWithDisk(s Sample, written int64) Summary {
	sum := Summarize(s)
	if s.AllOps > 0 && written >= 0 {
		sum.DiskPerOp = float64(written) / float64(s.AllOps)
	}
	return sum
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted values: the smallest value that at least p percent of the values
// do not exceed. It is zero for no values. With 20 values p99 is the
// maximum, which is the honest answer for so few.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The epsilon keeps 0.99*100 from becoming rank 100 by rounding.
	rank := int(math.Ceil(float64(n)*p/100 - 1e-9))
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}
