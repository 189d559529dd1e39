package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/state"
)

// StateSample is the workload states a client read at At.
type StateSample struct {
	At     time.Time
	States []state.WorkloadState
}

// Cut is a time an agent was cut off from every replica. A zero To means
// the cut had not ended when the samples were taken. A Partial cut is
// packet loss on the agent's path to the leader: the agent may lose its
// stream at any moment of it, or not at all.
type Cut struct {
	Agent    string
	From, To time.Time
	Partial  bool
}

// DisconnectTolerance is how much earlier than the grace period the server
// may declare an agent gone: timers, heartbeats and the sampling of the
// cut's start are not exact.
const DisconnectTolerance = time.Second

// DisconnectSettle is how long AgentDisconnected may still be read after a
// cut ends: the agent reconnects (Ankaios agents retry every second) and
// then reports its workloads again.
const DisconnectSettle = 5 * time.Second

// DisconnectedOnlyWhenCut checks that AgentDisconnected appears only for
// agents that were really cut off longer than the grace period. A sample at
// time t showing a workload of agent X as AgentDisconnected is allowed only
// if some Cut c of X has
//
//	c.To − c.From ≥ grace − DisconnectTolerance   (the cut lasted long enough; open cuts always do)
//	c.From + grace − DisconnectTolerance ≤ t      (the grace period had passed)
//	t ≤ c.To + DisconnectSettle                   (not long after the cut healed)
//
// For a partial cut the agent may have lost its stream just before the
// heal, so the last bound is c.To + grace + DisconnectSettle.
func DisconnectedOnlyWhenCut(samples []StateSample, cuts []Cut, grace time.Duration) Result {
	res := Result{Name: "disconnected-only-when-cut"}
	byAgent := map[string][]Cut{}
	for _, c := range cuts {
		byAgent[c.Agent] = append(byAgent[c.Agent], c)
	}
	allowed := func(agent string, t time.Time) bool {
		for _, c := range byAgent[agent] {
			open := c.To.IsZero()
			if !open && c.To.Sub(c.From) < grace-DisconnectTolerance {
				continue
			}
			if t.Before(c.From.Add(grace - DisconnectTolerance)) {
				continue
			}
			settle := DisconnectSettle
			if c.Partial {
				settle += grace
			}
			if !open && t.After(c.To.Add(settle)) {
				continue
			}
			return true
		}
		return false
	}
	seen, shown := 0, 0
	var bad []string
	for _, s := range samples {
		for _, ws := range s.States {
			if ws.State.State != state.StateAgentDisconnected {
				continue
			}
			seen++
			if allowed(ws.Instance.AgentName, s.At) {
				continue
			}
			if shown < 20 {
				bad = append(bad, fmt.Sprintf("%s: %s AgentDisconnected without a cut of %s longer than %v", s.At.Format("15:04:05.000"), ws.Instance, ws.Instance.AgentName, grace))
			}
			shown++
		}
	}
	if shown == 0 {
		res.OK = true
		res.Detail = fmt.Sprintf("%d AgentDisconnected readings in %d samples, all during cuts of %d", seen, len(samples), len(cuts))
		return res
	}
	res.Detail = fmt.Sprintf("%d AgentDisconnected readings not explained by a cut:\n  %s", shown, strings.Join(bad, "\n  "))
	return res
}
