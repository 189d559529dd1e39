package podman

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// psSample is `podman ps --all --format json` output of podman 4.3,
// trimmed to a few fields; Labels is null for a container without any.
const psSample = `[
  {"AutoRemove": false, "Command": ["sleep", "1000"], "ExitCode": 0,
   "Id": "c601", "Labels": {"agent": "x", "name": "a.b.x"}, "Names": ["a.b.x"], "State": "running"},
  {"Id": "f8ca", "Labels": null, "Names": ["t2"], "State": "exited", "ExitCode": 3}
]`

func TestParsePS(t *testing.T) {
	cs, err := parsePS(psSample)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ID != "c601" || cs[0].Labels["name"] != "a.b.x" || cs[0].State != "running" ||
		cs[1].ExitCode != 3 || cs[1].Labels != nil {
		t.Fatalf("parsed %+v", cs)
	}
	if _, err := parsePS("Error: not json"); err == nil {
		t.Fatal("no error for output that is not JSON")
	}
}

// swdd~podman-state-getter-maps-state~3
func TestExecState(t *testing.T) {
	failed := func(sub, info string) state.ExecutionState {
		return state.ExecutionState{State: state.StateFailed, SubState: sub, AdditionalInfo: info}
	}
	starting := func(info string) state.ExecutionState {
		return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: info}
	}
	stopping := func(info string) state.ExecutionState {
		return state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping, AdditionalInfo: info}
	}
	tests := []struct {
		podState string
		exitCode int
		want     state.ExecutionState
	}{
		{"running", 0, state.RunningOk},
		{"Running", 0, state.RunningOk},
		{"created", 0, starting("created")},
		{"configured", 0, starting("configured")},
		{"initialized", 0, starting("initialized")},
		{"exited", 0, state.SucceededOk},
		{"exited", 3, failed(state.SubExecFailed, "exit code 3")},
		{"Exited", 137, failed(state.SubExecFailed, "exit code 137")},
		{"stopping", 0, stopping("stopping")},
		{"stopped", 0, stopping("stopped")},
		{"removing", 0, stopping("removing")},
		{"paused", 0, failed(state.SubUnknown, "paused")},
		{"unknown", 0, failed(state.SubUnknown, "unknown")},
		{"", 0, failed(state.SubUnknown, "no state reported by podman")},
	}
	for _, tt := range tests {
		got := execState(container{State: tt.podState, ExitCode: tt.exitCode})
		if got != tt.want {
			t.Errorf("%s/%d: got %v, want %v", tt.podState, tt.exitCode, got, tt.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s/%d: %v", tt.podState, tt.exitCode, err)
		}
	}
}

// fakePS counts `podman ps` calls; release lets a test hold calls open.
type fakePS struct {
	calls   atomic.Int32
	fail    atomic.Int32 // how many more calls fail
	release chan struct{}
}

func (f *fakePS) fetch(ctx context.Context) ([]container, error) {
	n := f.calls.Add(1)
	if f.release != nil {
		<-f.release
	}
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("podman ps: exit status 125")
	}
	return []container{{ID: "c", State: "running", ExitCode: int(n)}}, nil
}

// swdd~podmancli-container-state-cache-refresh~1
func TestPSCache(t *testing.T) {
	ctx := context.Background()

	t.Run("recent answer reused, invalidate forces a call", func(t *testing.T) {
		f := &fakePS{}
		c := &psCache{fetch: f.fetch}
		now := time.Now()
		for range 3 {
			if _, err := c.get(ctx, now.Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.calls.Load(); n != 1 {
			t.Fatalf("%d podman ps calls for three recent-enough gets, want 1", n)
		}
		c.invalidate()
		s, err := c.get(ctx, now.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if n := f.calls.Load(); n != 2 || s.byID["c"].ExitCode != 2 {
			t.Fatalf("after invalidate: %d calls, answer of call %d; want the answer of call 2", n, s.byID["c"].ExitCode)
		}
	})

	t.Run("answer older than asked refetched", func(t *testing.T) {
		f := &fakePS{}
		c := &psCache{fetch: f.fetch}
		if _, err := c.get(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		s, err := c.get(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if f.calls.Load() != 2 || s.byID["c"].ExitCode != 2 {
			t.Fatalf("%d calls, want 2", f.calls.Load())
		}
	})

	t.Run("concurrent callers share one call", func(t *testing.T) {
		f := &fakePS{release: make(chan struct{})}
		c := &psCache{fetch: f.fetch}
		before := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if _, err := c.get(ctx, before); err != nil {
					t.Error(err)
				}
			})
		}
		// The callers pile up on the call under way, or come after it
		// and find its answer, which started after `before`: one call
		// either way.
		testwait.For(t, 10*time.Second, func() bool { return f.calls.Load() > 0 }, "the podman ps call")
		close(f.release)
		wg.Wait()
		if n := f.calls.Load(); n != 1 {
			t.Fatalf("%d podman ps calls for 8 concurrent gets, want 1", n)
		}
	})

	t.Run("one failure retried", func(t *testing.T) {
		f := &fakePS{}
		f.fail.Store(1)
		c := &psCache{fetch: f.fetch}
		if _, err := c.get(ctx, time.Now()); err != nil {
			t.Fatalf("one failing podman ps not retried: %v", err)
		}
		f.fail.Store(2)
		if _, err := c.get(ctx, time.Now()); err == nil {
			t.Fatal("two failing podman ps calls: no error")
		}
	})

	t.Run("caller's context ends its wait", func(t *testing.T) {
		f := &fakePS{release: make(chan struct{})}
		c := &psCache{fetch: f.fetch}
		held := make(chan struct{})
		go func() {
			defer close(held)
			_, _ = c.get(ctx, time.Now())
		}()
		defer func() { close(f.release); <-held }()
		testwait.For(t, 10*time.Second, func() bool { return f.calls.Load() > 0 }, "the podman ps call")
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := c.get(cctx, time.Now().Add(-time.Minute)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want context.DeadlineExceeded", err)
		}
		if n := f.calls.Load(); n != 1 {
			t.Fatalf("%d podman ps calls, want 1: the second caller joins the call under way", n)
		}
	})
}
