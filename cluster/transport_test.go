package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckPipeline's AppendEntries parks until the pipeline is closed, as
// hashicorp/raft's does in its pipeline deadlock.
type stuckPipeline struct{ closed chan struct{} }

func (p *stuckPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	<-p.closed
	return nil, raft.ErrPipelineShutdown
}
func (p *stuckPipeline) Consumer() <-chan raft.AppendFuture { return nil }
func (p *stuckPipeline) Close() error {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	return nil
}

// A pipelined send that parks is failed by closing the pipeline after the
// stall limit, so replication falls back instead of hanging.
func TestWatchedPipeline_UnparksAStuckSend(t *testing.T) {
	inner := &stuckPipeline{closed: make(chan struct{})}
	p := &watchedPipeline{AppendPipeline: inner, limit: 50 * time.Millisecond}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, raft.ErrPipelineShutdown) {
			t.Fatalf("err = %v, want ErrPipelineShutdown", err)
		}
		if time.Since(start) < 50*time.Millisecond {
			t.Fatal("pipeline closed before the stall limit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stuck send was never released")
	}
}

// The contact tracker keeps the latest answer per peer, on the injected
// clock.
func TestContactTracker(t *testing.T) {
	now := t0
	c := newContactTracker(func() time.Time { return now })
	c.record("b", 3, 10)
	now = now.Add(time.Second)
	c.record("b", 4, 12)
	got, ok := c.get("b")
	if !ok || got.Term != 4 || got.LastLog != 12 || !got.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("contact = %+v, %v", got, ok)
	}
	if _, ok := c.get("x"); ok {
		t.Fatal("contact for a peer that never answered")
	}
}
