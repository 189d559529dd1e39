package clients

import (
	"sync"
	"time"
)

// AckResolution is the bucket width of Acks: fine enough for timeline
// samples taken every 100 ms.
const AckResolution = 100 * time.Millisecond

// Acks counts acknowledged writes and deletes over time, in
// AckResolution buckets, so a campaign can sample the ack rate while the
// clients run. The zero value is ready; it is safe for concurrent use.
type Acks struct {
	mu      sync.Mutex
	buckets map[int64]int // at.UnixNano()/AckResolution → acks
	total   int
}

// Add counts one acknowledgement at at.
func (a *Acks) Add(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.buckets == nil {
		a.buckets = map[int64]int{}
	}
	a.buckets[bucketOf(at)]++
	a.total++
}

// Total is every acknowledgement counted.
func (a *Acks) Total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// Count is the acknowledgements in [from, to), to the bucket: a bucket
// counts when it starts within the range.
func (a *Acks) Count(from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for b := bucketOf(from); b < bucketOf(to); b++ {
		n += a.buckets[b]
	}
	return n
}

// PerSecond is the acknowledgements of each whole second from from on,
// until to: element i counts [from+i s, from+(i+1) s).
func (a *Acks) PerSecond(from, to time.Time) []int {
	var out []int
	for t := from; t.Before(to); t = t.Add(time.Second) {
		out = append(out, a.Count(t, t.Add(time.Second)))
	}
	return out
}

func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(AckResolution) }
