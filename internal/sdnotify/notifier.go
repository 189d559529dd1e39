package sdnotify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Notifier sends the service's state to systemd's NOTIFY_SOCKET. A nil
// Notifier sends nothing.
type Notifier struct {
	log *slog.Logger
	mu  sync.Mutex
	// status is the last STATUS= text sent, so a repeat is not sent.
	status string
}

// New returns a notifier; log records a failing send.
func New(log *slog.Logger) *Notifier { return &Notifier{log: log} }

func (n *Notifier) send(state string) {
	if n == nil {
		return
	}
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("systemd notify failed", "state", state, "error", err)
	}
}

// Ready says the service serves (READY=1).
func (n *Notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Stopping says the service shuts down (STOPPING=1).
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sends STATUS=text unless it is what was sent last.
func (n *Notifier) Status(text string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if text == n.status {
		return
	}
	n.status = text
	n.send("STATUS=" + text)
}

// Watchdog pets systemd's watchdog (WATCHDOG=1) every half WatchdogSec,
// at the start of a slot of that length (clock.NextSlot, so that the
// wake-up meets the process's other once-a-second ones), and only after
// alive returned nil within a quarter of WatchdogSec: a main loop that
// does not answer in time stops the petting and systemd restarts the
// service. Without WATCHDOG_USEC (for this process) it starts nothing and
// returns a no-op; otherwise it returns the function that stops the
// goroutine and waits for it.
func (n *Notifier) Watchdog(alive func(context.Context) error) (stop func()) {
	if n == nil {
		return func() {}
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog setting ignored", "error", err)
	}
	if err != nil || interval <= 0 {
		return func() {}
	}
	period := interval / 2
	if period > time.Second {
		period = period.Truncate(time.Second)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go n.pet(period, interval/4, alive, done, stopped)
	return func() {
		close(done)
		<-stopped
	}
}

// pet is the watchdog goroutine (docs/threads.md): owned by Watchdog's
// caller, stopped by closing done.
func (n *Notifier) pet(period, answerWithin time.Duration, alive func(context.Context) error, done <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	clk := clock.Real()
	healthy := true
	for {
		t := clock.NewTimer(clk, clock.UntilSlot(clk.Now(), period))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
		err := alive(ctx)
		cancel()
		if err != nil {
			if healthy {
				n.log.Error("main loop does not answer: no longer petting the systemd watchdog", "error", err)
			}
			healthy = false
			continue
		}
		if !healthy {
			n.log.Info("main loop answers again: petting the systemd watchdog")
		}
		healthy = true
		n.send(daemon.SdNotifyWatchdog)
	}
}
