package server

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// TestHelloProtocolVersionRefusalText: a hello whose protocol version is
// not semantic ("1") is refused like one of another major: with
// FailedPrecondition and Ankaios' text, "Unsupported protocol version '1'.
// Currently supported '1'", on agent and CLI streams alike.
func TestHelloProtocolVersionRefusalText(t *testing.T) {
	ts := startServer(t, nil)
	tests := []struct {
		name    string
		kind    wire.Kind
		version string
	}{
		{"agent, not semantic", wire.KindAgent, "1"},
		{"agent, empty", wire.KindAgent, ""},
		{"agent, other major", wire.KindAgent, "2.0.0"},
		{"cli, not semantic", wire.KindCLI, "1"},
		{"cli, two parts", wire.KindCLI, "1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.dial(tt.kind)
			hello := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: tt.version}}}
			if tt.kind == wire.KindAgent {
				hello = &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: "agent_A", ProtocolVersion: tt.version}}}
			}
			c.send(hello)
			testwait.For(t, 5e9, func() bool { return c.streamErr() != nil }, "stream refused")
			st := status.Convert(c.streamErr())
			want := "Unsupported protocol version '" + tt.version + "'. Currently supported '1'"
			if st.Code() != codes.FailedPrecondition || st.Message() != want {
				t.Fatalf("refusal %v %q, want FailedPrecondition %q", st.Code(), st.Message(), want)
			}
		})
	}
}
