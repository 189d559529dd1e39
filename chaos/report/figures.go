package report

import (
	"slices"
	"time"
)

// Figure summarises one measured duration over the faults of a kind.
// Durations are nanoseconds in JSON.
type Figure struct {
	N             int
	P50, P99, Max time.Duration
}

// Figures are the three failover durations of a fault kind, each from
// the fault: to a new leader, to the next acknowledged write, and to
// every agent attached to the new leader.
type Figures struct {
	NewLeader   Figure
	NextAck     Figure
	AllAttached Figure
}

// FlashFigures summarise the flash faults of a kind (a power cut, a
// replica's full, read-only or failing storage): how long the cluster
// took to report and to repair them, how much the writers got done
// meanwhile, and whether an acknowledged write was lost.
type FlashFigures struct {
	N int
	// Detect is from the fault to the StorageFailed problem naming its
	// replica (storage faults); Repair from the heal, or the power
	// coming back, to the target back: a healthy voter again without
	// the problem, or after a power cut the cluster settled with every
	// stable workload running. Undetected and Unrepaired count the
	// faults that never got there within the campaign's bounds.
	Detect, Repair         Figure
	Undetected, Unrepaired int
	// Writes and Acked count the writes and deletes the clients called
	// in the faults' windows (from the fault to the repair) and those
	// acknowledged; MinShare is the lowest share of one fault.
	Writes, Acked int
	MinShare      float64
	// LongestGap is, per fault, the longest stretch of its window
	// without an acknowledged write or delete.
	LongestGap Figure
	// Checked counts the acknowledged writes checked across the faults
	// (per fault, the last one of each key before it, read back after
	// it), Lost those a read after the fault showed lost.
	Checked, Lost int
}

// Measure summarises ds.
func Measure(ds []time.Duration) Figure {
	p50, p99, max := Percentiles(ds)
	return Figure{N: len(ds), P50: p50, P99: p99, Max: max}
}

// Percentiles returns the median, the 99th percentile and the maximum of
// ds by nearest rank (the smallest value with at least p% of ds at or
// below it), so every figure is a measured value; all zero for none.
func Percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return rank(s, 50), rank(s, 99), s[len(s)-1]
}

// rank is the nearest-rank p-th percentile of sorted s.
func rank(s []time.Duration, p int) time.Duration {
	i := (p*len(s)+99)/100 - 1 // ceil(p/100 * n) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Availability is the share of 1 s buckets, from the first sample to the
// last, in which at least one write was acknowledged. A sample's acks
// count in the bucket its At falls in (the last sample's in the last
// bucket); a bucket with no sample counts as without acks. No samples, or
// samples spanning no time, give 0.
func Availability(samples []Sample) float64 {
	if len(samples) == 0 {
		return 0
	}
	first, last := samples[0].At, samples[0].At
	for _, s := range samples {
		if s.At.Before(first) {
			first = s.At
		}
		if s.At.After(last) {
			last = s.At
		}
	}
	if !last.After(first) {
		return 0
	}
	span := last.Sub(first)
	n := int((span + time.Second - 1) / time.Second)
	acked := make([]bool, n)
	for _, s := range samples {
		if s.Acks > 0 {
			acked[min(int(s.At.Sub(first)/time.Second), n-1)] = true
		}
	}
	k := 0
	for _, a := range acked {
		if a {
			k++
		}
	}
	return float64(k) / float64(n)
}
