package agent

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// memberlist's lines take the replicas' format: the level from the line,
// component=memberlist, repeats held back; debug once stopping.
func TestMemberlistLinesOntoSlog(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	w := newLevelWriter(slog.New(h), clock.NewFake(time.Unix(0, 0)))
	std := log.New(w, "", 0)
	for range 3 {
		std.Printf("[ERR] memberlist: Failed to send ping: connection refused")
	}
	std.Printf("[DEBUG] memberlist: Stream connection from=10.0.0.2:4000")
	w.stopping.Store(true)
	std.Printf("[ERR] memberlist: Failed to send gossip: transport closed")
	want := []string{
		`level=ERROR msg="Failed to send ping: connection refused" component=memberlist`,
		`level=DEBUG msg="Stream connection from=10.0.0.2:4000" component=memberlist`,
		`level=DEBUG msg="Failed to send gossip: transport closed" component=memberlist`,
	}
	if got := strings.TrimSpace(buf.String()); got != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}
