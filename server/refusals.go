package server

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/peer"
)

// refusalLogWindow is how often a repeated refusal is logged at most: a
// client that retries at once (an upstream Ankaios agent retries every
// second, and a Grapnel agent once did thousands of times a second)
// would otherwise fill the log with one line per attempt.
const refusalLogWindow = 10 * time.Second

// peerHost is the address a stream came from, without the port: a peer
// that reconnects over new connections stays one peer.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return h
	}
	return p.Addr.String()
}
