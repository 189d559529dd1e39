package server

import (
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/server/events"
	"github.com/grapnel-io/grapnel/server/logcampaign"
)

// leader is the memory only the leader keeps: event subscriptions and log
// campaigns belong to live streams and are rebuilt empty on every term.
type leader struct {
	s      *Server
	term   *term
	events *events.Handler
	logs   *logcampaign.Store
}

// monitorLeadership is the one goroutine that reacts to leadership
// changes: it starts the leader loop on gaining leadership and stops it on
// losing it. A repeated "true" is treated as lost-and-regained.
func (s *Server) monitorLeadership() {
	defer s.monitorWG.Done()
	var (
		stopCh chan struct{}
		loopWG sync.WaitGroup
	)
	stop := func() {
		if stopCh == nil {
			return
		}
		close(stopCh)
		loopWG.Wait()
		stopCh = nil
	}
	start := func() {
		stop()
		stopCh = make(chan struct{})
		loopWG.Add(1)
		go func(ch chan struct{}) {
			defer loopWG.Done()
			s.leaderLoop(ch)
		}(stopCh)
	}
	if s.node.IsLeader() {
		start()
	}
	for {
		select {
		case isLeader := <-s.node.LeaderCh():
			if isLeader {
				start()
			} else {
				stop()
			}
		case <-s.shutdownCh:
			stop()
			return
		}
	}
}

// leaderLoop runs while this replica leads: Barrier, establish, serve the
// inbox, revoke.
func (s *Server) leaderLoop(stopCh chan struct{}) {
	for {
		if err := s.node.Barrier(s.cfg.ApplyTimeout); err == nil {
			break
		} else {
			s.log.Warn("barrier failed, retrying", "error", err)
		}
		select {
		case <-stopCh:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	l := s.establishLeadership(stopCh)
	defer s.revokeLeadership()
	for {
		select {
		case m := <-l.term.inbox:
			l.handle(m)
		case <-stopCh:
			return
		}
	}
}

// establishLeadership rebuilds the leader memory from the FSM, seeds the
// startup manifest into a fresh cluster, and opens the gate for streams.
func (s *Server) establishLeadership(stopCh chan struct{}) *leader {
	l := &leader{
		s:      s,
		term:   &term{inbox: make(chan inMsg, 256), stop: stopCh},
		events: events.NewHandler(),
		logs:   logcampaign.NewStore(),
	}
	l.seedStartupState()
	s.leaderMu.Lock()
	s.term = l.term
	s.leaderMu.Unlock()
	s.log.Info("leading", "id", s.node.ID())
	return l
}

// revokeLeadership closes the gate and drops every stream so that agents
// and CLIs reconnect to the new leader. It is idempotent.
func (s *Server) revokeLeadership() {
	s.leaderMu.Lock()
	s.term = nil
	s.leaderMu.Unlock()
	s.conns.closeAll()
}
