package logbridge

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/grapnel-io/grapnel/internal/clock"
)

func newTest(level string) (*Logger, *bytes.Buffer, *clock.Fake) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	clk := clock.NewFake(time.Unix(1000, 0))
	return New(h, Options{Level: level, Clock: clk}), &buf, clk
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Raft's lines come out in slog's format, with the logger's name as the
// component and hclog's arguments as attributes.
func TestHclogOntoSlog(t *testing.T) {
	l, buf, _ := newTest("debug")
	raft := l.Named("raft")
	raft.Info("entering follower state", "follower", "n1", "leader-address", "", "backoff time", 2*time.Second)
	raft.With("peer", "n2").Warn("appendEntries rejected", "next", hclog.Format{"%d-%d", 4, 5})
	raft.Trace("below the level")
	got := lines(buf)
	want := []string{
		`level=INFO msg="entering follower state" component=raft follower=n1 leader-address="" backoff_time=2s`,
		`level=WARN msg="appendEntries rejected" component=raft peer=n2 next=4-5`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l.IsTrace() || !l.IsDebug() {
		t.Fatalf("IsTrace %v IsDebug %v at level debug", l.IsTrace(), l.IsDebug())
	}
}

// The level option is the least level passed on: "warn" by default.
func TestLevel(t *testing.T) {
	l, buf, _ := newTest("")
	l.Info("quiet")
	l.Warn("loud")
	if got := lines(buf); len(got) != 1 || !strings.Contains(got[0], "msg=loud") {
		t.Fatalf("at the default level: %q", got)
	}
}

// memberlist's standard-logger lines get their level from the "[LEVEL]"
// prefix and their component from the name after it.
func TestMemberlistLines(t *testing.T) {
	l, buf, _ := newTest("debug")
	std := l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	std.Printf("[ERR] memberlist: Failed to send ping: write udp 10.0.0.1:7946->10.0.0.2:7946: connection refused")
	std.Printf("[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed, network may be misconfigured")
	std.Printf("[DEBUG] memberlist: Stream connection from=10.0.0.2:41234")
	std.Printf("a line without a level: kept whole")
	want := []string{
		`level=ERROR msg="Failed to send ping: write udp 10.0.0.1:7946->10.0.0.2:7946: connection refused" component=memberlist`,
		`level=WARN msg="Was able to connect to n2 over TCP but UDP probes failed, network may be misconfigured" component=memberlist`,
		`level=DEBUG msg="Stream connection from=10.0.0.2:41234" component=memberlist`,
		`level=INFO msg="a line without a level: kept whole"`,
	}
	if got := lines(buf); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A logger already named memberlist is not named twice.
	buf.Reset()
	l.Named("memberlist").StandardLogger(nil).Printf("[INFO] memberlist: joined")
	if got := lines(buf); len(got) != 1 || !strings.HasSuffix(got[0], "component=memberlist") {
		t.Fatalf("named twice: %q", got)
	}
}

func TestParseLine(t *testing.T) {
	for line, want := range map[string][3]string{
		"[ERR] memberlist: Failed: x": {"error", "memberlist", "Failed: x"},
		"[WARNING] x":                 {"warn", "", "x"},
		"[BOGUS] memberlist: x":       {"", "", "[BOGUS] memberlist: x"},
		"memberlist: x":               {"", "", "memberlist: x"},
		"[INFO] a b: c":               {"info", "", "a b: c"},
	} {
		level, component, msg := ParseLine(line)
		lv := ""
		if level != hclog.NoLevel {
			lv = level.String()
		}
		if got := [3]string{lv, component, msg}; got != want {
			t.Errorf("ParseLine(%q) = %q, want %q", line, got, want)
		}
	}
}

// While a peer is off, a leader's heartbeat to it fails about every
// 0.4 s: one line at once, then one a window with how many were left out,
// whatever the error says; another peer's error, and another message, go
// out at once. Lines below warn are never held back.
func TestRepeatedErrorsRateLimited(t *testing.T) {
	l, buf, clk := newTest("debug")
	raft := l.Named("raft")
	heartbeat := func(peer string, i int) {
		raft.Error("failed to heartbeat to", "peer", peer, "backoff time", time.Duration(i)*10*time.Millisecond,
			"error", errors.New("dial tcp: connection refused"))
	}
	for i := range 75 { // 0 s to 29.6 s: one window
		heartbeat("n2", i)
		if i == 10 {
			heartbeat("n3", i)
			raft.Error("failed to appendEntries to", "peer", "n2", "error", "i/o timeout")
			raft.Debug("not limited")
			raft.Debug("not limited")
		}
		clk.Advance(400 * time.Millisecond)
	}
	got := lines(buf)
	if len(got) != 5 {
		t.Fatalf("%d lines within one window, want 5 (n2, n3, appendEntries, two debug):\n%s", len(got), buf.String())
	}
	if !strings.Contains(got[0], `msg="failed to heartbeat to" component=raft peer=n2`) || strings.Contains(got[0], "suppressed") {
		t.Fatalf("first line: %s", got[0])
	}
	buf.Reset()
	heartbeat("n2", 75) // 30 s after the first
	got = lines(buf)
	if len(got) != 1 || !strings.Contains(got[0], "peer=n2") || !strings.HasSuffix(got[0], "suppressed=74") {
		t.Fatalf("after the window, want one line with suppressed=74: %q", got)
	}
	// An hour of it: 9,000 tries, 120 lines.
	buf.Reset()
	for i := range 9000 {
		clk.Advance(400 * time.Millisecond)
		heartbeat("n2", i)
	}
	if n := len(lines(buf)); n != 120 {
		t.Fatalf("%d lines in an hour, want 120", n)
	}
}

// A component named Unlimited (the caller's own) is never held back.
func TestUnlimited(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.NewTextHandler(&buf, nil), Options{Clock: clock.NewFake(time.Unix(0, 0)), Unlimited: []string{"cluster"}})
	for range 3 {
		l.Named("cluster").Error("refused a handshake", "addr", "10.0.0.9:4000")
		l.Named("raft").Error("failed to heartbeat to", "peer", "n2")
	}
	if n := len(lines(&buf)); n != 4 {
		t.Fatalf("%d lines, want 3 of cluster and 1 of raft:\n%s", n, buf.String())
	}
}
