package cluster

import "github.com/hashicorp/raft"

// electAloneNow starts an election at once when this replica is the only
// voter of its configuration, instead of after a heartbeat timeout (200
// to 400 ms by default) without a leader: with one voter there is no
// other leader to hear from, so waiting only delays the first answer
// after power-on. hashicorp/raft has no option for it, but a reload to a
// shorter heartbeat timeout wakes the follower loop, which finds it has
// never heard from a leader and stands for election. So the timing is
// reloaded longer and then back to the configured one, which is the
// shorter of the two; nothing else changes, and the leader lease, which
// Raft wants no longer than the heartbeat timeout, is never in the way.
// With other voters the usual timeout applies: an election that skips it
// could disrupt a leader this replica has merely not heard from yet.
func (n *Node) electAloneNow() {
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
	normal := n.raft.ReloadableConfig()
	long := normal
	long.HeartbeatTimeout = 2 * normal.HeartbeatTimeout
	long.ElectionTimeout = max(normal.ElectionTimeout, long.HeartbeatTimeout)
	if err := n.raft.ReloadConfig(long); err != nil {
		n.logger.Warn("could not start the single voter's election early", "error", err)
		return
	}
	if err := n.raft.ReloadConfig(normal); err != nil {
		n.logger.Error("could not restore the Raft timing after an early election", "error", err)
	}
}
