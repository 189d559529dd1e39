package process

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// A record wiped behind the agent's back does not make a running
// workload look gone, which would make drift repair start a second copy
// next to it: State stays Running while the processes it last saw run,
// Watch fires when they end, Delete stops them; once they have ended the
// instance is gone.
func TestWipedRecordOfARunningWorkload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	ctx := context.Background()
	for _, end := range []string{"delete", "exit"} {
		t.Run(end, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			id := h.create(h.spec("wiped-"+end, "command: sleep\nargs: ['60']"))
			pid, err := h.rt.PID(id)
			if err != nil {
				t.Fatal(err)
			}
			h.waitState(id, state.RunningOk)
			dir, _ := h.rt.recordDir(id)
			if err := os.RemoveAll(filepath.Dir(dir)); err != nil {
				t.Fatal(err)
			}
			if st := h.state(id); st != state.RunningOk {
				t.Fatalf("State without the record while it runs: %v", st)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			changed, err := h.rt.Watch(wctx, id)
			if err != nil || changed == nil {
				t.Fatalf("Watch without the record: %v, %v; want a watch on the processes", changed, err)
			}
			switch end {
			case "delete":
				if err := h.rt.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
				if !processGone(pid) {
					t.Fatalf("Delete left process %d running", pid)
				}
			case "exit":
				mustKill(t, pid, syscall.SIGKILL)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not fire when the processes ended")
			}
			testwait.For(t, 10*time.Second, func() bool {
				_, err := h.rt.State(ctx, id)
				return isNotFound(err)
			}, "State to say the instance is gone")
		})
	}
}
