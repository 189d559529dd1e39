package server

import (
	"context"
	"sync"
	"testing"
	"time"
)

// The systemd watchdog pets only while the main loop answers: a leader
// loop stuck in a handler (here: a resync whose caller never takes the
// answer) fails Alive until it runs again, and leadership is reported to
// OnLeadership.
func TestAliveFailsWhileTheLeaderLoopIsFrozen(t *testing.T) {
	var mu sync.Mutex
	var told []bool
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) {
		c.OnLeadership = func(leading bool) { mu.Lock(); told = append(told, leading); mu.Unlock() }
	})
	alive := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return ts.srv.Alive(ctx)
	}
	if err := alive(5 * time.Second); err != nil {
		t.Fatalf("idle leader loop: %v", err)
	}
	mu.Lock()
	// Under -race a lone voter may lose and regain leadership at start:
	// what counts is that gains and losses alternate and it now leads.
	for i, leading := range told {
		if leading != (i%2 == 0) {
			t.Errorf("OnLeadership calls = %v, want true, false, true, ... ending with true", told)
		}
	}
	if len(told) == 0 || !told[len(told)-1] {
		t.Errorf("OnLeadership calls = %v, want the last one true", told)
	}
	mu.Unlock()

	// Freeze the loop: it blocks handing back the answer nobody reads.
	// Under -race the lone voter may lose leadership meanwhile, and the
	// next term's loop answers: freeze that one then.
	for attempt := 1; ; attempt++ {
		term := ts.srv.currentTerm()
		freeze := &resyncCall{agent: "nobody", done: make(chan error)}
		term.inbox <- freeze
		err := alive(300 * time.Millisecond)
		if err != nil {
			<-freeze.done // thaw
			break
		}
		go func() { <-freeze.done }() // thaw, whatever comes next
		if ts.srv.currentTerm() == term || attempt == 3 {
			t.Fatal("Alive succeeded while the leader loop was frozen")
		}
	}
	if err := alive(5 * time.Second); err != nil {
		t.Fatalf("thawed leader loop: %v", err)
	}
}

// A replica that does not lead answers from its leadership monitor.
func TestAliveAnswersFromTheMonitorWhenNotLeading(t *testing.T) {
	ts := startServer(t, nil)
	ts.srv.leaderMu.Lock()
	saved := ts.srv.term
	ts.srv.term = nil // as between terms
	ts.srv.leaderMu.Unlock()
	defer func() { ts.srv.leaderMu.Lock(); ts.srv.term = saved; ts.srv.leaderMu.Unlock() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Alive(ctx); err != nil {
		t.Fatalf("monitor: %v", err)
	}
}
