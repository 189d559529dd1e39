package wire

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// Kind names one of the three Ankaios streams.
type Kind int

// The Ankaios streams.
const (
	// KindCLI is CliConnection.ConnectCli: a commander that also gets the
	// workload-state broadcasts.
	KindCLI Kind = iota
	// KindCommand is CommandConnection.ConnectCommand: a commander that
	// gets only its responses.
	KindCommand
	// KindAgent is AgentConnection.ConnectAgent.
	KindAgent
)

func (k Kind) String() string {
	switch k {
	case KindCLI:
		return "CliConnection"
	case KindCommand:
		return "CommandConnection"
	case KindAgent:
		return "AgentConnection"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Stream is the client side of any of the three streams: they carry the
// same messages.
type Stream = grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer]

// Open opens a stream of kind k on cc. A client opens one to a replica; a
// follower opens one to the leader for the stream it proxies.
func (k Kind) Open(ctx context.Context, cc grpc.ClientConnInterface) (Stream, error) {
	switch k {
	case KindCLI:
		return grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
	case KindCommand:
		return grpcapi.NewCommandConnectionClient(cc).ConnectCommand(ctx)
	case KindAgent:
		return grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	}
	return nil, fmt.Errorf("no Ankaios stream of %v", k)
}
