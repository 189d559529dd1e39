package cluster

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// ElectAloneNow starts an election at once when this replica is the only
// voter of its configuration and has no leader (see electAloneNow). It is
// for a node started with Config.DeferSoloElection; otherwise NewNode
// has done it.
func (n *Node) ElectAloneNow() { n.electAloneNow() }

// electAloneNow starts an election at once when this replica is the only
// voter of its configuration, instead of after a heartbeat timeout (200
// to 400 ms by default) without a leader: with one voter there is no
// other leader to hear from, so waiting only delays the first answer
// after power-on. With other voters see electEarly.
func (n *Node) electAloneNow() {
	if n.leaderHeard() {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var voters []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
		}
	}
	if len(voters) != 1 || string(voters[0].ID) != n.cfg.ID {
		return
	}
	n.standNow("the single voter's")
}

// standNow makes a follower that has never heard from a leader stand for
// election now. hashicorp/raft has no option for it, but a reload to a
// shorter heartbeat timeout wakes the follower loop, which finds it has
// never heard from a leader and stands for election. So the timing is
// reloaded longer and then back to the configured one, which is the
// shorter of the two; nothing else changes, and the leader lease, which
// Raft wants no longer than the heartbeat timeout, is never in the way.
// A follower that heard from a leader within a heartbeat timeout only
// restarts its timer.
func (n *Node) standNow(whose string) {
	if n.storage.Fault() != nil || n.hold.active() {
		return // it cannot win or must not, and the reload would undo its long timers
	}
	normal := n.raft.ReloadableConfig()
	long := normal
	long.HeartbeatTimeout = 2 * normal.HeartbeatTimeout
	long.ElectionTimeout = max(normal.ElectionTimeout, long.HeartbeatTimeout)
	if err := n.raft.ReloadConfig(long); err != nil {
		n.logger.Warn("could not start "+whose+" election early", "error", err)
		return
	}
	if err := n.raft.ReloadConfig(normal); err != nil {
		n.logger.Error("could not restore the Raft timing after an early election", "error", err)
	}
}

// electEarly shortens the first election of replicas that start with
// state at about the same time, as a vehicle's compute units do at
// power-on: nobody leads then, and each replica would wait a heartbeat
// timeout (200 to 400 ms by default) before anyone stands. A voter that
// has not heard from a leader since it started stands as soon as a
// majority of the voters is alive in gossip, none of them reports a
// leader, and its turn has come: the alive voters take turns in id
// order, the first at once and each next one earlyStagger later, so
// that two rarely stand together and split the votes. A voter whose log
// is behind is refused, and the next one's turn comes. Raft's pre-vote
// keeps an early candidate from disrupting a leader it merely has not
// heard from yet: voters that know a leader refuse it, and no term
// changes. It stands at most once and stops as soon as this replica
// hears from a leader, stands by itself, or shuts down; Raft's own timers
// run as always.
func (n *Node) electEarly() {
	defer n.wg.Done()
	changes, cancel := n.feed.Subscribe()
	defer cancel()
	stagger := min(n.timing.HeartbeatTimeout/4, earlyStagger)
	timer := clock.NewTimer(n.cfg.Clock, time.Hour)
	timer.Stop()
	defer timer.Stop()
	var since time.Time // when the conditions began to hold
	for {
		if n.leaderHeard() {
			return
		}
		cfg, err := n.configuration()
		if err != nil {
			return
		}
		turn, ok := earlyTurn(n.cfg.ID, cfg, n.peers.all())
		switch {
		case !ok:
			since = time.Time{}
			timer.Stop()
		default:
			now := n.cfg.Clock.Now()
			if since.IsZero() {
				since = now
			}
			wait := since.Add(time.Duration(turn) * stagger).Sub(now)
			if wait <= 0 {
				n.logger.Info("standing for election early: a majority of the voters is up and none has a leader", "turn", turn)
				n.standNow("an early")
				return
			}
			timer.Reset(wait)
		}
		select {
		case <-changes:
		case <-timer.C:
		case <-n.shutdownCh:
			return
		}
	}
}

// earlyStagger is the time between two voters' early turns: more than an
// election takes on a LAN (one round of pre-votes and votes, each with an
// fsync), a quarter of the default heartbeat timeout. It does not grow
// with longer Raft timers (a quarter of those is capped here): the turns
// wait for an election to finish, not for a timeout, and a first voter
// whose log is behind would otherwise hold everyone back for a quarter of
// a long timeout.
const earlyStagger = 50 * time.Millisecond

// leaderHeard says this replica knows a leader (possibly itself), has
// heard from one since it started, or is no longer a follower.
func (n *Node) leaderHeard() bool {
	if _, id := n.raft.LeaderWithID(); id != "" {
		return true
	}
	return n.raft.State() != raft.Follower || !n.raft.LastContact().IsZero()
}

// earlyTurn says whether self may stand for election early, and its turn:
// how many alive voters come before it in id order. It may when it is a
// voter of cfg among several, a majority of the voters (self included) is
// alive in gossip, and no alive server member reports a leader.
func earlyTurn(self string, cfg raft.Configuration, peers map[string]peerInfo) (int, bool) {
	var voters []string
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	sort.Strings(voters)
	for _, p := range peers {
		if p.ID != self && p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && p.LeaderSeen != "" {
			return 0, false
		}
	}
	alive, turn, voter := 0, 0, false
	for _, id := range voters {
		p := peers[id]
		switch {
		case id == self:
			voter = true
			alive++
		case p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && p.StorageFailed == "":
			// A voter whose storage failed can vote for nobody.
			alive++
			if !voter {
				turn++
			}
		}
	}
	if !voter || len(voters) < 2 || alive <= len(voters)/2 {
		return 0, false
	}
	return turn, true
}
