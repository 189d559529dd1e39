package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestAckLogWaitsForAnUpdateSentAfterTheKill(t *testing.T) {
	l := &ackLog{changed: make(chan struct{})}
	base := time.Now()
	kill := base.Add(10 * time.Millisecond)
	done := make(chan time.Time, 1)
	go func() {
		acked, err := l.waitSentAfter(context.Background(), kill)
		if err != nil {
			t.Error(err)
		}
		done <- acked
	}()
	// Sent before the kill, acknowledged after it: an answer that was on
	// its way, not one the new leader gave.
	l.record(base, kill.Add(time.Millisecond), nil)
	l.record(kill, kill.Add(2*time.Millisecond), errors.New("connection lost"))
	select {
	case got := <-done:
		t.Fatalf("returned %v for an update sent before the kill", got)
	case <-time.After(50 * time.Millisecond):
	}
	want := kill.Add(400 * time.Millisecond)
	l.record(kill.Add(time.Millisecond), want, nil)
	select {
	case got := <-done:
		if !got.Equal(want) {
			t.Fatalf("acknowledged at %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the acknowledgement after the kill was not seen")
	}
	if l.acks != 2 || l.errs != 1 {
		t.Fatalf("acks %d errs %d, want 2 and 1", l.acks, l.errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.waitSentAfter(ctx, want.Add(time.Hour)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("err %v, want ErrNotReady", err)
	}
}
