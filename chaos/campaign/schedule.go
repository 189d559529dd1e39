package campaign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind names a fault kind; it is the key of Report.Figures.
type Kind string

// The fault kinds, each a function in faults.go.
const (
	LeaderKill        Kind = "leader-kill"        // SIGKILL the leader, restart it after a pause
	FollowerKill      Kind = "follower-kill"      // SIGKILL a follower, restart it after a pause
	LeaderStop        Kind = "leader-stop"        // SIGSTOP the leader, SIGCONT after the hold
	LeaderPartition   Kind = "leader-partition"   // the leader's host cut from the other two
	MinorityPartition Kind = "minority-partition" // one follower's host cut from the other two
	OneWayPartition   Kind = "one-way-partition"  // packets leader → others dropped, back pass
	AgentCutShort     Kind = "agent-cut-short"    // a follower's host isolated for less than the grace
	AgentCutLong      Kind = "agent-cut-long"     // a follower's host isolated for more than the grace
	ClusterRestart    Kind = "cluster-restart"    // SIGTERM every replica, start them again
	ReplaceReplica    Kind = "replace-replica"    // remove a follower, join a fresh one
	PacketLoss        Kind = "packet-loss"        // 20–30 % loss between the leader and a follower
	Latency           Kind = "latency"            // delay on the leader's Raft link to a follower
	Intruder          Kind = "intruder"           // a non-replica host attacks every port (secure campaigns)
	Upgrade           Kind = "upgrade"            // a replica stopped and started on the other release's binary
	PowerCut          Kind = "power-cut"          // every host loses power: all its processes die, unsynced writes are lost
	DiskFull          Kind = "disk-full"          // one replica's flash full (ENOSPC) for the hold
	ReadOnly          Kind = "read-only"          // one replica's flash read-only (EROFS) for the hold
	FsyncError        Kind = "fsync-error"        // EIO on the fsyncs of one replica's WAL for the hold
	CorruptLog        Kind = "corrupt-log"        // a bit flipped in a WAL entry of a stopped replica, at rest
	CorruptSnapshot   Kind = "corrupt-snapshot"   // bits flipped in the newest snapshot of a stopped replica
	FlashReplaced     Kind = "flash-replaced"     // a stopped replica's data dir emptied: new flash, same name
)

// FlashKinds are the kinds that need the flash file system (flash.go);
// a campaign without it leaves them out.
var FlashKinds = []Kind{PowerCut, DiskFull, ReadOnly, FsyncError, CorruptLog, CorruptSnapshot, FlashReplaced}

// storageKinds fail one replica's storage while it runs (storage.go).
var storageKinds = []Kind{DiskFull, ReadOnly, FsyncError}

// dataKinds damage a stopped replica's data (datafault.go).
var dataKinds = []Kind{CorruptLog, CorruptSnapshot, FlashReplaced}

// UpgradeFinalize is not a kind of the plan: it records the campaign's
// UpgradeFinalize after the plan's last upgrade, with figures of its own.
const UpgradeFinalize Kind = "upgrade-finalize"

// Kinds is every fault kind, in the order a short campaign uses when the
// seed does not shuffle it.
var Kinds = []Kind{
	LeaderKill, FollowerKill, LeaderStop, LeaderPartition, MinorityPartition, OneWayPartition,
	AgentCutShort, AgentCutLong, ClusterRestart, ReplaceReplica, PacketLoss, Latency, Intruder, Upgrade,
	PowerCut, DiskFull, ReadOnly, FsyncError, CorruptLog, CorruptSnapshot, FlashReplaced,
}

// ConfineUpgrades drops the upgrade steps of the rounds from rounds on.
// The campaign finalizes after the last upgrade, and only from then on
// does a removal revoke the removed replica's certificates: a long
// campaign swaps releases in its first rounds and runs the rest, the
// intruder's revoked keys among them, at cluster version 1.
func ConfineUpgrades(steps []Step, rounds int) []Step {
	out := make([]Step, 0, len(steps))
	for _, s := range steps {
		if s.Kind != Upgrade || s.Round < rounds {
			out = append(out, s)
		}
	}
	return out
}

// Without is kinds less drop, in the same order.
func Without(kinds []Kind, drop ...Kind) []Kind {
	var out []Kind
	for _, k := range kinds {
		if !slices.Contains(drop, k) {
			out = append(out, k)
		}
	}
	return out
}

// Step is one scheduled fault with its random parameters fixed by the
// seed, so a seed reproduces the schedule exactly.
type Step struct {
	Kind Kind
	// Round numbers the plan's rounds of every kind from 0; a long
	// campaign ends only at a round's start.
	Round int
	// Pick chooses among equal targets (which follower, which link);
	// for a storage fault, even picks hit the leader and odd ones a
	// follower.
	Pick int
	// Hold is how long the fault lasts before it is healed (or the
	// pause before a killed replica restarts; for a power cut, how long
	// the power stays off).
	Hold time.Duration
	// Percent is the packet loss; Delay the added latency.
	Percent int
	Delay   time.Duration
	// Gap is the quiet time after the cluster settled, before the next
	// fault.
	Gap time.Duration
}

func (s Step) String() string {
	out := fmt.Sprintf("%s hold=%v pick=%d", s.Kind, s.Hold, s.Pick)
	if s.Percent > 0 {
		out += fmt.Sprintf(" loss=%d%%", s.Percent)
	}
	if s.Delay > 0 {
		out += fmt.Sprintf(" delay=%v", s.Delay)
	}
	return out
}

// Plan draws n steps of kinds from seed. A short plan (short true) has
// every kind exactly once, in an order drawn from the seed, and n is
// ignored; a long plan repeats shuffled rounds of every kind until it has
// n steps, so each kind comes up about equally often. grace is the
// replicas' agent reconnect grace: the agent cuts are held below and
// above it.
//
// A short plan puts its upgrade first: the campaign starts one replica on
// the previous release, so the cluster runs at cluster version 0 until
// that replica is upgraded and the campaign finalizes; with the upgrade
// first, every other kind, replace-replica and the intruder among them,
// runs at cluster version 1 with its full checks (a removal revokes the
// removed replica's certificates only from 1 on, docs/upgrade.md).
func Plan(kinds []Kind, seed int64, short bool, n int, grace time.Duration) []Step {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6368616f73))
	if short {
		n = len(kinds)
	}
	var out []Step
	for r := 0; len(out) < n; r++ {
		round := append([]Kind(nil), kinds...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		if short {
			if i := slices.Index(round, Upgrade); i > 0 {
				round = append(append([]Kind{Upgrade}, round[:i]...), round[i+1:]...)
			}
		}
		for _, k := range round {
			if len(out) == n {
				break
			}
			s := step(rng, k, short, grace)
			s.Round = r
			out = append(out, s)
		}
	}
	return out
}

// PreviousAtStart is the replica (an index among replicas) that starts on
// the previous release: the one the plan's first upgrade picks, so that in
// a short plan that upgrade moves it to this release and every replica
// runs this release from then on. -1 when steps have no upgrade.
func PreviousAtStart(steps []Step, replicas int) int {
	for _, s := range steps {
		if s.Kind == Upgrade {
			return upgradeTarget(s, replicas)
		}
	}
	return -1
}

// upgradeTarget is the replica an upgrade step swaps: chosen by the seed
// whatever its role, so that the replica that starts on the previous
// release is known before the cluster runs.
func upgradeTarget(s Step, replicas int) int { return s.Pick % replicas }

// upgradeLeads says whether the upgrade step first hands leadership to
// its target (odd multiples of the replica count), so that about half the
// upgrades stop the leader, whose graceful stop hands leadership over.
func upgradeLeads(s Step, replicas int) bool { return (s.Pick/replicas)%2 == 1 }

// LastUpgrade is the index of the last upgrade step, -1 when none.
func LastUpgrade(steps []Step) int {
	last := -1
	for i, s := range steps {
		if s.Kind == Upgrade {
			last = i
		}
	}
	return last
}

// between draws a duration in [lo, hi] to the millisecond.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	ms := int64((hi - lo) / time.Millisecond)
	return lo + time.Duration(rng.Int64N(ms+1))*time.Millisecond
}

// step fixes the parameters of one fault of kind k.
func step(rng *rand.Rand, k Kind, short bool, grace time.Duration) Step {
	// The gap is short: the cluster has already settled (every replica
	// up, one leader, agents attached) before it starts.
	s := Step{Kind: k, Pick: rng.IntN(1 << 16), Gap: between(rng, 500*time.Millisecond, 2*time.Second)}
	if short {
		s.Gap = time.Second
	}
	switch k {
	case LeaderKill, FollowerKill:
		s.Hold = between(rng, time.Second, 3*time.Second)
	case LeaderStop:
		s.Hold = between(rng, 2*time.Second, 4*time.Second)
	case LeaderPartition, MinorityPartition, OneWayPartition:
		s.Hold = between(rng, 3*time.Second, 6*time.Second)
	case AgentCutShort:
		s.Hold = grace / 2
	case AgentCutLong:
		s.Hold = 2 * grace
	case PacketLoss:
		s.Hold = between(rng, 4*time.Second, 8*time.Second)
		s.Percent = 20 + rng.IntN(11)
	case Latency:
		s.Hold = between(rng, 4*time.Second, 8*time.Second)
		s.Delay = between(rng, 20*time.Millisecond, 100*time.Millisecond)
	case ClusterRestart, ReplaceReplica, Upgrade:
		// For an upgrade: the pause between the old binary's exit and
		// the other's start (a unit rebooting into its other slot).
		s.Hold = between(rng, 500*time.Millisecond, 1500*time.Millisecond)
	case Intruder:
		s.Hold = intruderHold
	case PowerCut:
		s.Hold = between(rng, 500*time.Millisecond, 2*time.Second)
	case CorruptLog, CorruptSnapshot, FlashReplaced:
		// How long the unit stays down, as for a reboot.
		s.Hold = between(rng, 500*time.Millisecond, 1500*time.Millisecond)
	case DiskFull, ReadOnly, FsyncError:
		// Long enough for the writers to hit it and the replica to
		// report it; storageFault holds on until it is reported.
		s.Hold = between(rng, 3*time.Second, 6*time.Second)
	}
	return s
}

// ParseKinds reads a scripted schedule: comma-separated kind names, each
// run once in that order with parameters drawn from seed.
func ParseKinds(list []string, seed int64, grace time.Duration) ([]Step, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6368616f73))
	var out []Step
	for i, name := range list {
		k := Kind(name)
		known := false
		for _, x := range Kinds {
			known = known || x == k
		}
		if !known {
			return nil, fmt.Errorf("%w: faults[%d]: unknown kind %q (known: %v)", ErrConfig, i, name, Kinds)
		}
		out = append(out, step(rng, k, false, grace))
	}
	return out, nil
}
