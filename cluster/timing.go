package cluster

import "time"

// Timing holds every timer and threshold of a replica: Raft's timers, the
// gossip timers and the leader's reconciliation (autopilot) settings. The
// defaults are chosen for a vehicle LAN (sub-millisecond round trips
// between compute units): a heartbeat every 125 ms and an election after
// 300–900 ms without contact (a follower checks every 1–2 heartbeat
// timeouts whether it heard the leader within one). That slow path is
// left only for a leader whose unit or link is gone: a leader whose
// process died or froze is replaced within tens of milliseconds or a
// quarter of a second (fastfail.go). The Raft paper measured a 287 ms
// median outage with 150 ms election timeouts; hashicorp/raft's own
// defaults (1 s) give 1–3 s. The timeout was 200 ms until the heartbeats
// it needs were a third of an idle leader's CPU; 300 ms cut the idle
// leader by a fifth and kept the slow path under a second (max 843 ms
// over 20 silent leaders); see docs/replication.md, "Timing".
//
// Zero fields take the value of DefaultTiming, field by field;
// HeartbeatInterval is derived from the others.
type Timing struct {
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimeout is how long a leader goes without hearing from a
	// quorum before it steps down. 300 ms (it was 100 ms, then 200 ms;
	// hashicorp/raft: half the heartbeat timeout): as long as a follower
	// waits before it stands for election, so a leader does not give up
	// over a gap in heartbeats that no follower would act on.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long a leader with nothing new to send waits
	// before an AppendEntries tells the followers the commit index (one to
	// two timeouts). Only the followers' copies of the state wait for it:
	// the leader answers once a quorum stored an entry, and a follower
	// that becomes leader applies what it holds before it serves. 1 s
	// (hashicorp/raft: 50 ms): every timeout is a pipelined AppendEntries
	// to each follower, a wake-up at both ends, even when nothing is new;
	// at 250 ms they were about a tenth of an idle leader's CPU. A busy
	// leader sends at once anyway, and the heartbeats, not these, keep the
	// followers from standing for election.
	CommitTimeout time.Duration
	// HeartbeatInterval is the time between two of the leader's
	// heartbeats to a follower; the leader sends every follower's at the
	// same moment (paceLoop), and Raft's own heartbeats follow one to two
	// intervals after the last one if the leader's are late.
	// hashicorp/raft sends them every HeartbeatTimeout/10 to /5 (20–40 ms
	// with 200 ms), five to ten per timeout, and on an idle cluster they
	// are most of the work: every one wakes both ends. Two to three per
	// timeout and per lease are enough: the leader keeps its lease, and no
	// follower times out, unless heartbeats stop for 175 ms beyond the
	// interval, or 50 ms beyond the fallback's longest gap (two
	// intervals). Zero means five twelfths of the shorter of
	// HeartbeatTimeout and LeaderLeaseTimeout: 125 ms by default, an
	// eighth of a second, so that every second heartbeat falls on a Watch
	// heartbeat (250 ms) and every eighth on the once-a-second timers
	// (clock.NextSlot). Two intervals must be shorter than the lease.
	HeartbeatInterval time.Duration
	// StorageProbeMin and StorageProbeMax bound the backoff between two
	// probes of a storage that failed a write (storage.go): 1 s doubling
	// up to 30 s, so that storage that comes back at once is noticed
	// within a second, and storage that stays failed costs one small
	// write and fsync every half minute.
	StorageProbeMin time.Duration
	StorageProbeMax time.Duration
	// ScrubInterval is how often the replica reads its whole Raft log and
	// newest snapshot back and checks them (integrity.go), so that data
	// that rots at rest is found while a healthy majority can repair it:
	// 10 minutes by default, reads only (the log trails about 10 MiB).
	// Negative: never.
	ScrubInterval time.Duration

	Gossip    GossipTiming
	Autopilot Autopilot
}

// GossipTiming tunes memberlist. Gossip does not drive Raft failover (Raft
// has its own timers); it tells replicas and clients where everyone is,
// which leader each member sees, and feeds bootstrap and dead-server
// removal. So it can be a little slower than Raft and must never flap.
type GossipTiming struct {
	// ProbeInterval is how often a member probes one random peer. 1 s
	// (memberlist's LAN value): gossip does not drive failover, and every
	// probe is a wake-up of two idle replicas; a dead member is still known
	// within a few seconds (see SuspicionMult).
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack before indirect
	// probes. 200 ms (LAN: 500 ms) still tolerates a scheduling stall on a
	// busy compute unit.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a member stays suspect before it is
	// declared dead: SuspicionMult × max(1, log10(N)) × ProbeInterval, and up
	// to SuspicionMaxTimeoutMult times that without confirmations. 4 (the
	// LAN value) gives 4 s with confirmations: long enough to ride out a
	// short network hiccup, short enough that a dead replica is known within
	// a few seconds.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the unconfirmed suspicion time; 3
	// (LAN: 6) gives at most 12 s in a 3-replica pool, where only one other
	// member can confirm.
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often queued broadcasts (metadata updates such
	// as a new leader, member state) are sent. 500 ms (memberlist's LAN
	// value: 200 ms): memberlist wakes every interval whether or not
	// anything is queued, so it is the most frequent timer of an idle
	// replica after the Raft heartbeats. Clients learn a new leader from
	// the replicas' Watch and Status, gossip only hints at it, so a new
	// leader's name may spread a few hundred milliseconds later.
	GossipInterval time.Duration
	// PushPullInterval is the full state sync period. 15 s (LAN: 30 s):
	// cheap with a handful of replicas, and repairs missed broadcasts.
	PushPullInterval time.Duration
	// TCPTimeout bounds a stream (join, push/pull, fallback probe). 2 s
	// (LAN: 10 s): on a LAN a peer that does not answer in 2 s is not there,
	// and a join retry should not hang.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime lets a replica that died come back under the same
	// name with a new address after this long (memberlist default: never),
	// so a replaced compute unit keeps its replica id. 10 s.
	DeadNodeReclaimTime time.Duration
	// JoinBackoffMin and JoinBackoffMax bound the jittered exponential
	// backoff between join attempts: 100 ms doubling up to 5 s, so a replica
	// started before its peers joins within a moment of them appearing, and
	// a long-absent peer costs one attempt every few seconds.
	JoinBackoffMin time.Duration
	JoinBackoffMax time.Duration
	// ReconnectInterval is how often a replica tries to reach dead server
	// members again (Serf's reconnect; memberlist alone never re-merges a
	// healed partition). 5 s: the dead are few and an attempt is one TCP
	// connect.
	ReconnectInterval time.Duration
}

// Autopilot configures the leader's reconciliation of gossip into the Raft
// configuration (names and meaning follow Consul/Nomad autopilot).
type Autopilot struct {
	// ReconcileInterval is how often the leader reconciles even without a
	// gossip event. 1 s.
	ReconcileInterval time.Duration
	// LastContactThreshold: a member the leader has not heard from for
	// longer is unhealthy. Consul uses 200 ms with its 1 s heartbeat
	// multiplier-1 timing (one to two of its heartbeat intervals); here
	// the 300 ms heartbeat timeout, two and a half of the leader's
	// 125 ms heartbeat intervals, and as long as the timeout when that
	// is longer.
	LastContactThreshold time.Duration
	// MaxTrailingLogs: a member more entries behind the leader is unhealthy.
	// 250 as in Consul: a few group commits, never a lagging replica.
	MaxTrailingLogs uint64
	// ServerStabilizationTime is how long a new member must stay healthy
	// before it becomes a voter. Consul waits 10 s; 3 s here, which is still
	// some two dozen heartbeats and several gossip probe rounds, so a replaced
	// compute unit votes within seconds.
	ServerStabilizationTime time.Duration
	// DeadServerTimeout is how long a member may be dead (or missing) in
	// gossip before the leader removes it from the Raft configuration. 60 s:
	// a rebooting compute unit (tens of seconds) keeps its seat, one gone
	// for a minute is treated as replaced. Removal never goes below
	// MinQuorum voters nor leaves the alive voters without a majority.
	DeadServerTimeout time.Duration
	// MinQuorum is the fewest voters automatic removal leaves. 0 means
	// Config.BootstrapExpect, or 1 without it.
	MinQuorum int
}

// DefaultTiming is the vehicle-LAN timing.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 300 * time.Millisecond,
		CommitTimeout:      time.Second,
		StorageProbeMin:    time.Second,
		StorageProbeMax:    30 * time.Second,
		ScrubInterval:      10 * time.Minute,
		Gossip:             DefaultGossipTiming(),
		Autopilot:          DefaultAutopilot(),
	}
}

// DefaultGossipTiming is memberlist's LAN configuration tuned for a vehicle
// LAN; each field's comment gives the reason.
func DefaultGossipTiming() GossipTiming {
	return GossipTiming{
		ProbeInterval:           time.Second,
		ProbeTimeout:            200 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 3,
		GossipInterval:          500 * time.Millisecond,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              2 * time.Second,
		DeadNodeReclaimTime:     10 * time.Second,
		JoinBackoffMin:          100 * time.Millisecond,
		JoinBackoffMax:          5 * time.Second,
		ReconnectInterval:       5 * time.Second,
	}
}

// DefaultAutopilot is the reconciliation configuration for the default
// Raft timing. In a Timing whose LastContactThreshold is 0 the threshold
// is scaled from HeartbeatTimeout instead.
func DefaultAutopilot() Autopilot {
	return Autopilot{
		ReconcileInterval:       time.Second,
		LastContactThreshold:    baseLastContactThreshold,
		MaxTrailingLogs:         250,
		ServerStabilizationTime: 3 * time.Second,
		DeadServerTimeout:       60 * time.Second,
	}
}

// RaftDefaultTiming is hashicorp/raft's DefaultConfig timing, kept to
// compare failover times against; gossip and autopilot keep their
// defaults, the last-contact threshold scaled to the slower heartbeat.
func RaftDefaultTiming() Timing {
	ap := DefaultAutopilot()
	ap.LastContactThreshold = 0
	return Timing{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		HeartbeatInterval:  100 * time.Millisecond,
		Gossip:             DefaultGossipTiming(),
		Autopilot:          ap,
	}
}

// baseLastContactThreshold is the default heartbeat timeout (two and a
// half heartbeat intervals), used with it and shorter ones and scaled for
// longer ones.
const baseLastContactThreshold = 300 * time.Millisecond

// withDefaults fills zero fields from DefaultTiming.
func (t Timing) withDefaults() Timing {
	def := DefaultTiming()
	setDur(&t.HeartbeatTimeout, def.HeartbeatTimeout)
	setDur(&t.ElectionTimeout, def.ElectionTimeout)
	setDur(&t.LeaderLeaseTimeout, def.LeaderLeaseTimeout)
	setDur(&t.CommitTimeout, def.CommitTimeout)
	setDur(&t.StorageProbeMin, def.StorageProbeMin)
	setDur(&t.StorageProbeMax, max(def.StorageProbeMax, t.StorageProbeMin))
	setDur(&t.ScrubInterval, def.ScrubInterval)
	if t.HeartbeatInterval == 0 {
		t.HeartbeatInterval = min(t.HeartbeatTimeout, t.LeaderLeaseTimeout) * 5 / 12
	}

	g, dg := &t.Gossip, def.Gossip
	setDur(&g.ProbeInterval, dg.ProbeInterval)
	setDur(&g.ProbeTimeout, dg.ProbeTimeout)
	setInt(&g.SuspicionMult, dg.SuspicionMult)
	setInt(&g.SuspicionMaxTimeoutMult, dg.SuspicionMaxTimeoutMult)
	setDur(&g.GossipInterval, dg.GossipInterval)
	setDur(&g.PushPullInterval, dg.PushPullInterval)
	setDur(&g.TCPTimeout, dg.TCPTimeout)
	setDur(&g.DeadNodeReclaimTime, dg.DeadNodeReclaimTime)
	setDur(&g.JoinBackoffMin, dg.JoinBackoffMin)
	setDur(&g.JoinBackoffMax, dg.JoinBackoffMax)
	setDur(&g.ReconnectInterval, dg.ReconnectInterval)

	a, da := &t.Autopilot, def.Autopilot
	setDur(&a.ReconcileInterval, da.ReconcileInterval)
	if a.LastContactThreshold == 0 {
		a.LastContactThreshold = baseLastContactThreshold
		if t.HeartbeatTimeout > def.HeartbeatTimeout {
			a.LastContactThreshold = baseLastContactThreshold * t.HeartbeatTimeout / def.HeartbeatTimeout
		}
	}
	if a.MaxTrailingLogs == 0 {
		a.MaxTrailingLogs = da.MaxTrailingLogs
	}
	setDur(&a.ServerStabilizationTime, da.ServerStabilizationTime)
	setDur(&a.DeadServerTimeout, da.DeadServerTimeout)
	return t
}

func setDur(v *time.Duration, def time.Duration) {
	if *v == 0 {
		*v = def
	}
}

func setInt(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}
