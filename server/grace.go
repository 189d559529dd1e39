package server

import (
	"github.com/grapnel-io/grapnel/state"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// DefaultAgentReconnectGrace is how long a new leader waits for the agents
// the FSM lists to reconnect before it treats them as gone.
const DefaultAgentReconnectGrace = 3 * time.Second

// graceTimer is one agent's reconnect grace. The timer posts the value
// itself, so a stale firing (the agent came back, or a newer grace
// replaced this one) is recognised and ignored.
type graceTimer struct {
	agent string
	timer clock.Timer
}

// reconnectGrace is the configured grace: the default when zero, none when
// negative.
func (s *Server) reconnectGrace() time.Duration {
	switch g := s.cfg.AgentReconnectGrace; {
	case g < 0:
		return 0
	case g == 0:
		return DefaultAgentReconnectGrace
	default:
		return g
	}
}

// startGrace gives each named agent without a stream to this leader the
// reconnect grace. Without a grace they are gone at once.
func (l *leader) startGrace(agents []string) {
	d := l.s.reconnectGrace()
	for _, a := range agents {
		if l.greeted[a].conn != nil || l.grace[a] != nil {
			continue
		}
		if d == 0 {
			l.disconnectAgent(a)
			continue
		}
		g := &graceTimer{agent: a}
		stop := l.term.stop
		g.timer = l.clock.AfterFunc(d, func() {
			select {
			case l.expired <- g:
			case <-stop:
			}
		})
		l.grace[a] = g
	}
}

// endGrace stops an agent's grace because it reconnected; it reports
// whether the agent was in grace.
func (l *leader) endGrace(agent string) bool {
	g := l.grace[agent]
	if g == nil {
		return false
	}
	g.timer.Stop()
	delete(l.grace, agent)
	return true
}

// graceExpired treats an agent that did not come back in time as gone:
// out of the agent map, its workloads AgentDisconnected.
//
// swdd~server-set-workload-state-on-disconnect~1
func (l *leader) graceExpired(g *graceTimer) {
	if l.grace[g.agent] != g {
		return
	}
	delete(l.grace, g.agent)
	l.s.log.Info("agent did not reconnect within the grace", "agent", g.agent)
	l.disconnectAgent(g.agent)
}

// stopGrace stops every grace timer at the end of the term.
func (l *leader) stopGrace() {
	for a, g := range l.grace {
		g.timer.Stop()
		delete(l.grace, a)
	}
}

// resyncAgents disconnects every agent stream after a snapshot restore
// and gives those agents, and the ones the restored store lists, the
// reconnect grace: an agent that comes back gets a ServerHello from the
// restored state.
func (l *leader) resyncAgents() {
	names := map[string]bool{}
	for a := range l.projected.store.Agents {
		names[a] = true
	}
	for a, g := range l.greeted {
		names[a] = true
		l.forgetAgentStream(a)
		g.conn.close()
	}
	for _, c := range append(l.helloWait, l.helloAfter...) {
		names[c.name] = true
	}
	l.dropWaitingHellos()
	l.startGrace(state.SortedKeys(names))
}
