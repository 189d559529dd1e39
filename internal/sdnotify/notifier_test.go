package sdnotify

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A frozen main loop stops the petting; once it answers again petting
// resumes.
func TestWatchdogPetsOnlyWhileTheLoopAnswers(t *testing.T) {
	f := sdnotifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", f.Path)
	t.Setenv("WATCHDOG_USEC", "200000") // pet every 100 ms, answer within 50 ms
	var frozen atomic.Bool
	var asked atomic.Int64
	alive := func(ctx context.Context) error {
		asked.Add(1)
		if frozen.Load() {
			<-ctx.Done()
			return errors.New("frozen")
		}
		return nil
	}
	stop := New(quiet()).Watchdog(alive)
	defer stop()
	testwait.For(t, 5*time.Second, func() bool { return f.Count("WATCHDOG=1") >= 3 }, "petting while healthy")

	frozen.Store(true)
	// Wait until a question has surely met the frozen loop, then check no
	// pet follows over several periods.
	from := asked.Load()
	testwait.For(t, 5*time.Second, func() bool { return asked.Load() >= from+2 }, "questions to the frozen loop")
	pets := f.Count("WATCHDOG=1")
	from = asked.Load()
	testwait.For(t, 5*time.Second, func() bool { return asked.Load() >= from+4 }, "more questions to the frozen loop")
	if got := f.Count("WATCHDOG=1"); got != pets {
		t.Fatalf("petted %d times while the loop was frozen", got-pets)
	}

	frozen.Store(false)
	testwait.For(t, 5*time.Second, func() bool { return f.Count("WATCHDOG=1") > pets }, "petting after the loop thawed")
}

// Without WATCHDOG_USEC nothing runs and nothing is asked; STATUS is sent
// only when it changes.
func TestNoWatchdogAndStatusOnChange(t *testing.T) {
	f := sdnotifytest.Listen(t)
	t.Setenv("NOTIFY_SOCKET", f.Path)
	t.Setenv("WATCHDOG_USEC", "")
	stop := New(quiet()).Watchdog(func(context.Context) error {
		t.Error("asked without a watchdog")
		return nil
	})
	stop()
	n := New(quiet())
	for _, s := range []string{"follower", "follower", "leader", "leader", "follower"} {
		n.Status(s)
	}
	n.Ready()
	testwait.For(t, 5*time.Second, func() bool { return f.Count("READY=1") == 1 }, "READY=1")
	if a, b := f.Count("STATUS=follower"), f.Count("STATUS=leader"); a != 2 || b != 1 {
		t.Fatalf("STATUS=follower %d times, STATUS=leader %d times; want 2 and 1", a, b)
	}
}
