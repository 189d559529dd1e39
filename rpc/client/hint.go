package client

import "slices"

// AddAddrs adds replica addresses learned outside the replicas' status
// (an agent hears of them by gossip) to the addresses asked when no leader
// is known. They count until the next status names the replica set, which
// includes every replica the cluster knows.
func (r *Resolver) AddAddrs(addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		if a != "" && !slices.Contains(r.opts.Addrs, a) && !slices.Contains(r.members, a) {
			r.members = append(slices.Clip(r.members), a)
		}
	}
}

// Hint takes a leader named outside the streams (by the replicas' gossip
// metadata): the next Leader and Open go there without asking around. A
// hint without both an id and an address is ignored. Whether the stream
// open now must move is the caller's decision: Stream.ReplicaID names the
// replica it is open to.
func (r *Resolver) Hint(leaderID, leaderAddr string) {
	if leaderID == "" || leaderAddr == "" {
		return
	}
	r.AddAddrs(leaderAddr)
	r.redirect(leaderID, leaderAddr)
}
