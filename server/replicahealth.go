package server

import (
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/state"
)

// The replicas' part of the problems view: the voters the leader does not
// reach (ReplicaDown) and a quorum with no margin left (QuorumAtRisk).
// The leader's view of the membership (cluster.Node.Members: the Raft
// configuration, gossip, and the contacts of its own heartbeats) lives in
// its memory only; the loop reads it again whenever the node signals a
// change of leader, configuration, gossip or health (Node.Changes), never
// on a timer of its own.

// DefaultReplicaDownGrace is how long a voter must stay unreachable before
// it is a problem: a new leader has heard from nobody yet, and a replica
// restarted by its unit is back within a few seconds.
const DefaultReplicaDownGrace = 5 * time.Second

// replicaDownGrace is the configured grace: the default when zero, none
// when negative.
func (s *Server) replicaDownGrace() time.Duration {
	switch g := s.cfg.ReplicaDownGrace; {
	case g < 0:
		return 0
	case g == 0:
		return DefaultReplicaDownGrace
	default:
		return g
	}
}

// replicaWatch is what the leader last read of the voters.
type replicaWatch struct {
	// voters counts the voters of the configuration; unreachable names
	// the ones not healthy in the leader's view, with why, and since
	// when this leader has seen each so.
	voters      int
	unreachable map[string]string
	since       map[string]time.Time
	// storage names the unreachable voters whose storage failed: their
	// own problem (StorageFailed) says so, they count against the
	// quorum only.
	storage map[string]bool
}

// refreshReplicas reads the membership again (Node.Changes fired, or the
// term began).
func (l *leader) refreshReplicas() {
	members, err := l.s.node.Members()
	if err != nil {
		return
	}
	w := &l.replicas
	now := l.clock.Now()
	prev := w.since
	w.voters, w.unreachable, w.since, w.storage = 0, map[string]string{}, map[string]time.Time{}, map[string]bool{}
	for _, m := range members {
		if !m.InConfig || !m.Voter {
			continue
		}
		w.voters++
		if m.Healthy || m.ID == l.s.node.ID() {
			continue
		}
		w.unreachable[m.ID] = unreachableWhy(m)
		if m.StorageFailed != "" {
			w.storage[m.ID] = true
		}
		if t, ok := prev[m.ID]; ok {
			w.since[m.ID] = t
		} else {
			w.since[m.ID] = now
		}
	}
}

// unreachableWhy says in a few words why a voter is not healthy. It names
// no duration: the problem keeps the words it opened with, and the facts'
// signature must not change while nothing does.
func unreachableWhy(m cluster.Member) string {
	switch {
	case m.StorageFailed != "":
		return "its storage failed"
	case m.GossipStatus == cluster.StatusDead:
		return "gossip reports it dead"
	case m.GossipStatus == cluster.StatusLeft:
		return "it left gossip"
	case m.LastContact < 0:
		return "it has not answered this leader"
	default:
		return "it does not answer the leader in time"
	}
}

// replicaSignature is the part of the facts' signature the replicas give.
func (w *replicaWatch) signature(b *strings.Builder) {
	b.WriteString(strings.Repeat("v", w.voters))
	b.WriteByte(':')
	for _, id := range state.SortedKeys(w.unreachable) {
		b.WriteString(id)
		b.WriteByte('=')
		b.WriteString(w.unreachable[id])
		b.WriteByte(',')
	}
	b.WriteByte('|')
}

// replicaFacts fills the replicas' facts: a voter unreachable for the
// grace is down; it returns when the earliest grace still running ends
// (zero if none).
func (l *leader) replicaFacts(f *problems.Facts, now time.Time) time.Time {
	w := &l.replicas
	if w.voters == 0 {
		return time.Time{}
	}
	grace := l.s.replicaDownGrace()
	var graceEnd time.Time
	down := 0
	for id, why := range w.unreachable {
		if end := w.since[id].Add(grace); now.Before(end) {
			graceEnd = earliest(graceEnd, end)
			continue
		}
		down++
		if w.storage[id] {
			continue
		}
		if f.ReplicasDown == nil {
			f.ReplicasDown = map[string]string{}
		}
		f.ReplicasDown[id] = why
	}
	f.Quorum = problems.Quorum{Voters: w.voters, Reachable: w.voters - down}
	return graceEnd
}
