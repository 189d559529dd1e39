package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Admission by certificate (issue 17). Gossip only says where a replica
// might be. With the Raft port on TLS, a candidate, whether for the
// bootstrap configuration or to be added as non-voter, enters the Raft
// configuration only after this node has dialled its announced Raft
// address over the mutual-TLS stream layer and the handshake showed a
// certificate of this CA naming replica ID, the id it announces (TLS 1.3
// proves the peer holds the certificate's key). Whoever answers there is
// then the replica Raft will talk to, and Raft's own dials keep
// requiring that id at that address (tlsLayer). The probe runs when a
// candidate appears or changes (address, or back after dying), never at
// idle: a proof is kept, and a failed one is retried a few times with
// backoff and then left until the candidate's gossip entry changes or a
// new run of it appears (a restart, perhaps with a new certificate
// after the old one was revoked).
// Without TLS (the insecure mode) gossip alone admits, as before.

// maxProofAttempts bounds the probes of one candidate appearance.
const maxProofAttempts = 4

// proof is what is known of one candidate's certificate.
type proof struct {
	addr string
	// since is the candidate's gossip StatusSince when probed: a member
	// back after dying is probed again; run is its incarnation, so a
	// restart that gossip never saw die is probed again too.
	since    time.Time
	run      uint64
	ok       bool
	running  bool
	attempts int
	next     time.Time
	err      error
}

// prover probes candidates and keeps the outcomes.
type prover struct {
	n      *Node
	mu     sync.Mutex
	proofs map[string]*proof
}

func newProver(n *Node) *prover { return &prover{n: n, proofs: map[string]*proof{}} }

// proven reports whether replica id has proven its certificate at the
// Raft address candidate c announces, for this gossip appearance and run
// of it; when it has not, it starts a probe
// unless one runs, the attempts are spent, or the backoff is not over.
// The result arrives later: the prover then wakes the reconciler and the
// bootstrap loop. err is the last failure, for the log.
func (p *prover) proven(id string, c peerInfo) (ok bool, err error) {
	addr, since := c.RaftAddress, c.StatusSince
	now := p.n.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.proofs[id]
	if pr == nil || pr.addr != addr || !pr.since.Equal(since) || pr.run != c.Incarnation {
		pr = &proof{addr: addr, since: since, run: c.Incarnation}
		p.proofs[id] = pr
	}
	if pr.ok || pr.running || pr.attempts >= maxProofAttempts || now.Before(pr.next) {
		return pr.ok, pr.err
	}
	pr.running = true
	pr.attempts++
	p.n.wg.Add(1)
	go p.probe(id, pr)
	return false, pr.err
}

// probe dials the candidate once over the TLS layer, requiring replica
// id, and records the outcome.
func (p *prover) probe(id string, pr *proof) {
	defer p.n.wg.Done()
	timeout := max(time.Second, p.n.timing.HeartbeatTimeout)
	c, err := p.n.tls.dialReplica(raft.ServerAddress(pr.addr), id, timeout)
	if err == nil {
		c.Close()
	}
	p.mu.Lock()
	pr.running, pr.ok, pr.err = false, err == nil, err
	attempt := pr.attempts
	if err != nil {
		// 1, 2, 4 reconcile intervals...
		pr.next = p.n.now().Add(p.n.timing.Autopilot.ReconcileInterval << (pr.attempts - 1))
	}
	p.mu.Unlock()
	if err == nil {
		p.n.logger.Info("candidate proved its replica certificate", "id", id, "raft", pr.addr)
	} else {
		p.n.logger.Warn("candidate did not prove a replica certificate; not admitting it", "id", id, "raft", pr.addr, "attempt", attempt, "error", err)
	}
	p.n.feed.Notify()
	p.n.triggerReconcile()
}

// admitted filters a gossip view for bootstrap: without TLS it is the
// view; with TLS, server members other than this replica stay only once
// they proved their certificate (probes start for the others).
func (n *Node) admitted(peers map[string]peerInfo) map[string]peerInfo {
	if n.tls == nil {
		return peers
	}
	out := make(map[string]peerInfo, len(peers))
	for id, p := range peers {
		if id != n.cfg.ID && p.GossipStatus == StatusAlive && p.RaftAddress != "" {
			if ok, _ := n.prover.proven(id, p); !ok {
				continue
			}
		}
		out[id] = p
	}
	return out
}
