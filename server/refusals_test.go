package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// linesOf are the lines of the log that contain substr.
func linesOf(l *syncbuf.Buffer, substr string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// A peer refused over and over gets one log line, then at most one per
// 10 s with the count of the refusals left out; another reason is logged
// at once. Before, every refusal wrote a line: 15,682 lines (2.3 MB) in
// 10 s for one agent whose certificate did not allow its name.
func TestRepeatedRefusalsLoggedBounded(t *testing.T) {
	var log syncbuf.Buffer
	clk := clock.NewFake(time.Now())
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
		c.Clock = clk
	})
	refuse := func(hello *grpcapi.ToServer, code codes.Code) {
		t.Helper()
		c := ts.dial(wire.KindAgent)
		c.send(hello)
		if _, ok := c.tryExpect(10*time.Second, func(*grpcapi.FromServer) bool { return false }); ok {
			t.Fatal("unexpected message")
		}
		if got := status.Code(c.streamErr()); got != code {
			t.Fatalf("stream ended with %v, want %v", c.streamErr(), code)
		}
		c.close()
	}
	badVersion := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_A", ProtocolVersion: "99.0.0"}}}
	const n = 50
	for range n {
		refuse(badVersion, codes.FailedPrecondition)
	}
	if got := linesOf(&log, "refused stream"); len(got) != 1 {
		t.Fatalf("%d lines for %d refusals, want 1:\n%s", len(got), n, strings.Join(got, "\n"))
	}
	refuse(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{}}}, codes.InvalidArgument)
	if got := linesOf(&log, "refused stream"); len(got) != 2 || !strings.Contains(got[1], "No AgentHello") {
		t.Fatalf("another reason was not logged at once:\n%s", strings.Join(got, "\n"))
	}
	clk.Advance(refusalLogWindow)
	refuse(badVersion, codes.FailedPrecondition)
	refuse(badVersion, codes.FailedPrecondition)
	got := linesOf(&log, "refused stream")
	if len(got) != 3 || !strings.Contains(got[2], "suppressed=49") || !strings.Contains(got[2], "Unsupported protocol version '99.0.0'") {
		t.Fatalf("after the window: want one more line with suppressed=49 naming the reason, got:\n%s", strings.Join(got, "\n"))
	}
}
