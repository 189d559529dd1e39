package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/state"
)

// Create hears from the shim through the ready pipe: with the runtime's
// clock standing still no backstop round runs, and Create still returns
// as soon as the shim recorded the workload, or why it did not start.
func TestCreateHearsTheShimWithoutPolling(t *testing.T) {
	skipWithoutPidfd(t)
	h := newHarness(t, Config{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := h.spec("sleeper", "command: sleep\nargs: ['60']")
	id, err := h.rt.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v (a Create that waits for the backstop ends with the context)", err)
	}
	t.Cleanup(func() {
		if err := h.rt.Delete(context.Background(), id); err != nil {
			t.Errorf("cleanup Delete: %v", err)
		}
	})
	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state %v, want Running(Ok)", st)
	}

	_, err = h.rt.Create(ctx, h.spec("missing", "command: /nonexistent/command"))
	if !errors.Is(err, ErrStart) || ctx.Err() != nil {
		t.Fatalf("Create of a missing command: %v (context: %v), want ErrStart before the context ends", err, ctx.Err())
	}
}

// A shim of an earlier release does not know the ready pipe and holds it
// open while it lives; Create hears of the start through the records.
func TestCreateWithShimThatKeepsTheReadyPipe(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "earlier-shim")
	script := "#!/bin/sh\nunset " + shim.ReadyEnv + "\nexec " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(old, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Shim: old})
	id := h.create(h.spec("sleeper", "command: sleep\nargs: ['60']"))
	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state %v, want Running(Ok)", st)
	}
}
