package workload

import (
	"context"
	"fmt"
)

// Alive reports whether the Manager still takes its locks: ops and mu are
// what every message from the server and every report goes through, so a
// Manager stuck holding one (a deadlock, a runtime call that hangs under
// the lock) fails it. The systemd watchdog (cmd/internal/agentcmd) asks once
// per petting interval. While an earlier probe is still stuck, Alive
// fails at once and starts no other, so a stuck Manager holds at most one
// probe goroutine.
func (m *Manager) Alive(ctx context.Context) error {
	m.probeMu.Lock()
	if m.probe == nil {
		done := make(chan struct{})
		m.probe = done
		go func() {
			m.ops.Lock()
			m.mu.Lock()
			//lint:ignore SA2001 taking the lock is the whole probe
			m.mu.Unlock()
			m.ops.Unlock()
			m.probeMu.Lock()
			m.probe = nil
			m.probeMu.Unlock()
			close(done)
		}()
	}
	done := m.probe
	m.probeMu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("workload manager did not answer: %w", context.Cause(ctx))
	}
}
