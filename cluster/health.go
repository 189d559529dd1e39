package cluster

import (
	"sync"
	"time"
)

// peerHealth is the leader's judgement of one member at one moment.
type peerHealth struct {
	// LastContact is how long ago the member last answered the leader; -1
	// when it never did in this term.
	LastContact time.Duration
	Trailing    uint64
	Healthy     bool
	// StableSince is when the member last turned healthy; promotion waits
	// for the stabilization time after it.
	StableSince time.Time
}

// healthView is the leader's latest judgement of each member; the
// reconciler refreshes it, and it remembers since when each member has
// been healthy without interruption.
type healthView struct {
	mu    sync.RWMutex
	peers map[string]peerHealth
}

func newHealthView() *healthView { return &healthView{peers: map[string]peerHealth{}} }

// update stores fresh judgements, carrying StableSince over while a member
// stays healthy; members not in v are forgotten. changed says whether any
// member's health flipped or the set changed.
func (h *healthView) update(v map[string]peerHealth, now time.Time) (_ map[string]peerHealth, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]peerHealth, len(v))
	changed = len(v) != len(h.peers)
	for id, p := range v {
		prev, ok := h.peers[id]
		if !ok || prev.Healthy != p.Healthy {
			changed = true
		}
		switch {
		case !p.Healthy:
			p.StableSince = time.Time{}
		case ok && prev.Healthy:
			p.StableSince = prev.StableSince
		default:
			p.StableSince = now
		}
		out[id] = p
	}
	h.peers = out
	return out, changed
}

// reset forgets everything; a new leadership term judges afresh.
func (h *healthView) reset() {
	h.mu.Lock()
	h.peers = map[string]peerHealth{}
	h.mu.Unlock()
}

// applyHealth fills the leader's live view into members of the configuration:
// last contact and trailing logs from the latest AppendEntries answers,
// and health judged now. The local member is in contact by definition.
func (n *Node) applyHealth(byID map[string]*Member) {
	now, term, last := n.now(), n.raft.CurrentTerm(), n.raft.LastIndex()
	for id, m := range byID {
		if !m.InConfig {
			continue
		}
		if id == n.cfg.ID {
			m.LastContact = 0
			continue
		}
		c, ok := n.contacts.get(id)
		ph := judge(n.timing.Autopilot, c, ok, true, term, last, now)
		m.LastContact, m.TrailingLogs = ph.LastContact, ph.Trailing
		m.Healthy = m.Healthy && ph.Healthy
	}
}
