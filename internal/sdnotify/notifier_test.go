package sdnotify

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// fakeSystemd listens on a unixgram NOTIFY_SOCKET in the test's temp dir
// and counts what arrives.
type fakeSystemd struct {
	mu   sync.Mutex
	msgs []string
}

func listen(t *testing.T) *fakeSystemd {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn") // sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	f := &fakeSystemd{}
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.msgs = append(f.msgs, string(buf[:n]))
			f.mu.Unlock()
		}
	}()
	return f
}

func (f *fakeSystemd) count(msg string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A frozen main loop stops the petting; once it answers again petting
// resumes.
func TestWatchdogPetsOnlyWhileTheLoopAnswers(t *testing.T) {
	f := listen(t)
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
	testwait.For(t, 5*time.Second, func() bool { return f.count("WATCHDOG=1") >= 3 }, "petting while healthy")

	frozen.Store(true)
	// Wait until a question has surely met the frozen loop, then check no
	// pet follows over several periods.
	from := asked.Load()
	testwait.For(t, 5*time.Second, func() bool { return asked.Load() >= from+2 }, "questions to the frozen loop")
	pets := f.count("WATCHDOG=1")
	from = asked.Load()
	testwait.For(t, 5*time.Second, func() bool { return asked.Load() >= from+4 }, "more questions to the frozen loop")
	if got := f.count("WATCHDOG=1"); got != pets {
		t.Fatalf("petted %d times while the loop was frozen", got-pets)
	}

	frozen.Store(false)
	testwait.For(t, 5*time.Second, func() bool { return f.count("WATCHDOG=1") > pets }, "petting after the loop thawed")
}

// Without WATCHDOG_USEC nothing runs and nothing is asked; STATUS is sent
// only when it changes.
func TestNoWatchdogAndStatusOnChange(t *testing.T) {
	f := listen(t)
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
	testwait.For(t, 5*time.Second, func() bool { return f.count("READY=1") == 1 }, "READY=1")
	if a, b := f.count("STATUS=follower"), f.count("STATUS=leader"); a != 2 || b != 1 {
		t.Fatalf("STATUS=follower %d times, STATUS=leader %d times; want 2 and 1", a, b)
	}
}
