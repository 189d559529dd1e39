package cluster

import (
	"strconv"
	"sync"
	"time"
)

// healthView is the leader's latest view of each follower: last contact
// and how far its log trails. The leader's reconciler refreshes it.
type healthView struct {
	mu    sync.RWMutex
	peers map[string]peerHealth
}

type peerHealth struct {
	LastContact time.Duration
	Trailing    uint64
	Healthy     bool
	// StableSince is when the member last turned healthy; promotion waits
	// for the stabilization time after it.
	StableSince time.Time
}

func (h *healthView) set(v map[string]peerHealth) {
	h.mu.Lock()
	h.peers = v
	h.mu.Unlock()
}

func (h *healthView) get(id string) (peerHealth, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p, ok := h.peers[id]
	return p, ok
}

// apply copies the leader's view into members; the local member is
// healthy and in contact by definition.
func (h *healthView) apply(byID map[string]*Member, self string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for id, m := range byID {
		if id == self {
			m.LastContact = 0
			continue
		}
		if p, ok := h.peers[id]; ok {
			m.LastContact = p.LastContact
			m.Healthy = m.Healthy && p.Healthy
		}
	}
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
