package cluster

import "time"

// Timing holds the Raft timers. The defaults are chosen for a vehicle LAN
// (sub-millisecond round trips between compute units): heartbeats every
// ~100 ms and an election after 300–600 ms without contact. The Raft paper
// measured a 287 ms median outage with 150 ms election timeouts;
// hashicorp/raft's own defaults (1 s) give 1–3 s. See docs/replication.md.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// DefaultTiming is the vehicle-LAN timing.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
	}
}

// RaftDefaultTiming is hashicorp/raft's DefaultConfig timing, kept to
// compare failover times against.
func RaftDefaultTiming() Timing {
	return Timing{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
	}
}
