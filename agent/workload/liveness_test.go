package workload

import (
	"context"
	"testing"
	"time"
)

// The agent's systemd watchdog pets only while the Manager takes its
// locks: one stuck under mu fails Alive (without piling up probes) until
// it lets go.
func TestAliveFailsWhileTheManagerIsStuck(t *testing.T) {
	h := newHarness(t)
	alive := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return h.m.Alive(ctx)
	}
	if err := alive(5 * time.Second); err != nil {
		t.Fatalf("idle manager: %v", err)
	}
	h.m.mu.Lock() // stuck
	for range 3 {
		if err := alive(50 * time.Millisecond); err == nil {
			h.m.mu.Unlock()
			t.Fatal("Alive succeeded while the Manager was stuck")
		}
	}
	h.m.probeMu.Lock()
	probing := h.m.probe != nil
	h.m.probeMu.Unlock()
	h.m.mu.Unlock()
	if !probing {
		t.Error("no probe under way while stuck")
	}
	if err := alive(5 * time.Second); err != nil {
		t.Fatalf("after the Manager let go: %v", err)
	}
}
