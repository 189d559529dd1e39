package cluster

import (
	"errors"
	"time"

	"github.com/grapnel-io/grapnel/internal/backoff"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// joinLoop first joins the gossip pool through Config.Join, retrying with
// jittered exponential backoff until one address answers; each failure is
// logged once, with the delay before the next attempt. Then it reconnects
// to dead server members every ReconnectInterval: memberlist alone never
// re-merges two halves of a healed partition once they declared each other
// dead. It stops on Shutdown or when gossip leaves.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	addrs := n.joinAddresses()
	g := n.timing.Gossip
	for attempt := 0; len(addrs) > 0; attempt++ {
		k, err := n.gossip.join(addrs)
		if errors.Is(err, errGossipStopped) {
			return
		}
		if err == nil {
			n.logger.Info("joined gossip pool", "contacted", k)
			break
		}
		d := joinBackoff(attempt, g.JoinBackoffMin, g.JoinBackoffMax, nil)
		n.logger.Warn("join failed; retrying", "addresses", addrs, "attempt", attempt+1, "retry_in", d, "error", err)
		if !n.sleep(d) {
			return
		}
	}
	for n.sleep(g.ReconnectInterval) {
		for _, addr := range n.reconnectTargets() {
			_, err := n.gossip.join([]string{addr})
			if errors.Is(err, errGossipStopped) {
				return
			}
			if err == nil {
				n.logger.Info("reconnected to dead member", "address", addr)
			}
		}
	}
}

// joinAddresses is Config.Join without this node's own gossip address
// (joining oneself would count as a successful join).
func (n *Node) joinAddresses() []string {
	var out []string
	for _, a := range n.cfg.Join {
		if a != n.gossip.address && a != n.cfg.GossipAddress {
			out = append(out, a)
		}
	}
	return out
}

// reconnectTargets are the gossip addresses of server members gossip holds
// dead (not left): always while they are in this node's Raft
// configuration, otherwise for DeadServerTimeout after they died.
func (n *Node) reconnectTargets() []string {
	cfg, err := n.configuration()
	if err != nil {
		return nil
	}
	inConfig := map[string]bool{}
	for _, s := range cfg.Servers {
		inConfig[string(s.ID)] = true
	}
	now := n.now()
	var out []string
	for _, p := range n.peers.all() {
		if p.ID == n.cfg.ID || p.Role != gossipmeta.RoleServer || p.GossipStatus != StatusDead || p.GossipAddress == "" {
			continue
		}
		if inConfig[p.ID] || now.Sub(p.StatusSince) < n.timing.Autopilot.DeadServerTimeout {
			out = append(out, p.GossipAddress)
		}
	}
	return out
}

// joinBackoff is the delay after the attempt-th failure: min doubled per
// attempt, capped at max, with equal jitter so replicas started together
// do not retry in lockstep.
func joinBackoff(attempt int, minD, maxD time.Duration, rnd backoff.Rand) time.Duration {
	return backoff.Equal(backoff.Exp(minD, maxD, attempt), rnd)
}

// sleep waits d; false when the node shuts down first.
func (n *Node) sleep(d time.Duration) bool {
	return backoff.Sleep(n.cfg.Clock, d, n.shutdownCh)
}
