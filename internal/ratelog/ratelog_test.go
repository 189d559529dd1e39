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

// The first line of a key goes out, then at most one per window with the
// count of those left out; another key is logged at once.
func TestAllow(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(clk, 10*time.Second)
	expect := func(key string, ok bool, n int) {
		t.Helper()
		gotOK, gotN := l.allow(key)
		if gotOK != ok || gotN != n {
			t.Fatalf("allow(%q) = %v, %d; want %v, %d", key, gotOK, gotN, ok, n)
		}
	}
	expect("a", true, 0)
	for range 5 {
		expect("a", false, 0)
	}
	expect("b", true, 0)
	clk.Advance(9 * time.Second)
	expect("a", false, 0)
	clk.Advance(time.Second)
	expect("a", true, 6)
	expect("a", false, 0)
	clk.Advance(10 * time.Second)
	expect("a", true, 1)
	clk.Advance(10 * time.Second)
	expect("a", true, 0)
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
