package server

import (
	"context"
	"fmt"
)

// Alive asks the loop that owns this replica's state to answer a ping: the
// leader loop while this replica leads, the leadership monitor otherwise.
// It returns nil once the loop answered and an error when ctx ends first,
// so a loop that is stuck (a frozen leader loop) is told apart from one
// that is merely idle. It wakes the loop only when called: the systemd
// watchdog (cmd/internal/servercmd) calls it once per petting interval.
func (s *Server) Alive(ctx context.Context) error {
	reply := make(chan struct{})
	// At most a few tries: a term that ends while it is asked hands the
	// question on to the monitor (or the next term).
	for range 3 {
		pings, ended := s.pings, (<-chan struct{})(nil)
		if t := s.currentTerm(); t != nil {
			pings, ended = t.ping, t.stop
		}
		select {
		case pings <- reply:
		case <-ended:
			continue
		case <-s.shutdownCh:
			return fmt.Errorf("server shut down")
		case <-ctx.Done():
			return fmt.Errorf("main loop did not take a ping: %w", context.Cause(ctx))
		}
		select {
		case <-reply:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("main loop did not answer a ping: %w", context.Cause(ctx))
		}
	}
	return fmt.Errorf("leadership changed while pinging")
}

// leadershipChanged tells Config.OnLeadership; it runs on the leader loop.
func (s *Server) leadershipChanged(leading bool) {
	if s.cfg.OnLeadership != nil {
		s.cfg.OnLeadership(leading)
	}
}
