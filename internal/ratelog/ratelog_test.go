package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

func TestLimiter(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	l := New(clk, 10*time.Second)
	for range 5 {
		l.Log(log, slog.LevelWarn, "a", "refused a")
	}
	l.Log(log, slog.LevelWarn, "b", "refused b")
	if got := strings.Count(buf.String(), "\n"); got != 2 {
		t.Fatalf("%d lines within the window:\n%s", got, buf.String())
	}
	clk.Advance(10 * time.Second)
	buf.Reset()
	l.Log(log, slog.LevelWarn, "a", "refused a")
	if !strings.Contains(buf.String(), "suppressed=4") {
		t.Fatalf("after the window: %q", buf.String())
	}
}

func TestLimiterForgetsQuietKeys(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	l := New(clk, time.Second)
	for i := range maxKeys {
		l.allow(string(rune('a' + i)))
	}
	clk.Advance(time.Second)
	l.allow("new")
	if len(l.seen) != 1 {
		t.Fatalf("%d keys kept", len(l.seen))
	}
}
