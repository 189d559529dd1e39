package cluster

import (
	"sort"
	"time"
)

// judge is the autopilot health predicate (as Consul's raft-autopilot):
// alive in gossip, answered the leader within LastContactThreshold, in
// the leader's term, and at most MaxTrailingLogs entries behind. A member
// that has not answered in this term is unhealthy with LastContact -1.
func judge(ap Autopilot, c contact, answered, gossipAlive bool, leaderTerm, leaderLast uint64, now time.Time) peerHealth {
	ph := peerHealth{LastContact: -1}
	if !answered {
		return ph
	}
	ph.LastContact = now.Sub(c.At)
	if leaderLast > c.LastLog {
		ph.Trailing = leaderLast - c.LastLog
	}
	ph.Healthy = gossipAlive && ph.LastContact <= ap.LastContactThreshold &&
		ph.Trailing <= ap.MaxTrailingLogs && c.Term == leaderTerm
	return ph
}

// serverView is one configuration member as the reconciler plans with it.
type serverView struct {
	ID    string
	Voter bool
	// Status is the gossip status, or statusMissing when gossip does not
	// know the member.
	Status string
	// Since is when Status began.
	Since time.Time
}

// statusMissing marks a configuration member gossip has never seen.
const statusMissing = "missing"

// removal is a planned (or refused) removal and why.
type removal struct {
	ID     string
	Reason string
}

// planRemovals decides which members to remove now. A member that left
// gracefully goes at once. A member dead or missing in gossip for at least
// DeadServerTimeout goes too, non-voters first, but a voter only while the
// voters stay at least minQuorum, the alive voters stay a majority of the
// remaining voters, and no more than (voters-1)/2 voters go in one pass (as
// Consul's autopilot, so a partition that makes many members look dead
// cannot shrink the configuration to the partitioned side). Members it
// keeps despite the timeout come back in held, with the reason.
func planRemovals(servers []serverView, self string, ap Autopilot, minQuorum int, now time.Time) (remove, held []removal) {
	voters, alive := 0, 0
	for _, s := range servers {
		if !s.Voter {
			continue
		}
		voters++
		if s.ID == self || s.Status == StatusAlive {
			alive++
		}
	}
	maxVoterRemovals := (voters - 1) / 2
	var dead []serverView
	for _, s := range servers {
		switch {
		case s.ID == self:
		case s.Status == StatusLeft:
			remove = append(remove, removal{s.ID, "left gracefully"})
			if s.Voter {
				voters--
			}
		case (s.Status == StatusDead || s.Status == statusMissing) && now.Sub(s.Since) >= ap.DeadServerTimeout:
			dead = append(dead, s)
		}
	}
	sort.Slice(dead, func(i, j int) bool {
		if dead[i].Voter != dead[j].Voter {
			return !dead[i].Voter
		}
		return dead[i].ID < dead[j].ID
	})
	removedVoters := 0
	for _, s := range dead {
		why := s.Status + " in gossip for " + now.Sub(s.Since).Round(time.Millisecond).String()
		if !s.Voter {
			remove = append(remove, removal{s.ID, why})
			continue
		}
		switch {
		case voters-1 < minQuorum:
			held = append(held, removal{s.ID, "removing it would leave fewer voters than the minimum quorum"})
		case alive*2 <= voters-1:
			held = append(held, removal{s.ID, "removing it would leave the alive voters without a majority"})
		case removedVoters >= maxVoterRemovals:
			held = append(held, removal{s.ID, "at most (voters-1)/2 voters are removed at a time"})
		default:
			remove = append(remove, removal{s.ID, why})
			voters--
			removedVoters++
		}
	}
	return remove, held
}

// planPromotions lists the non-voters healthy without interruption for at
// least ServerStabilizationTime, sorted by id.
func planPromotions(servers []serverView, health map[string]peerHealth, ap Autopilot, now time.Time) []string {
	var out []string
	for _, s := range servers {
		if s.Voter {
			continue
		}
		h, ok := health[s.ID]
		if ok && h.Healthy && !h.StableSince.IsZero() && now.Sub(h.StableSince) >= ap.ServerStabilizationTime {
			out = append(out, s.ID)
		}
	}
	sort.Strings(out)
	return out
}
