package rpc

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Redial bounds how long a gRPC connection to a replica waits before it
// dials again after a failure. gRPC's default starts at 1 s and grows by
// 1.6 up to 2 minutes, so a client that saw every replica down for ten
// seconds dialled the restarted leader only about 4 s after it was up (the
// chaos campaign's cluster restart: agents missed their reconnect grace).
// On a vehicle LAN a failed dial is cheap: start at 50 ms, never wait more
// than a second, and give up on a dial that has not completed in a second.
func Redial() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	})
}
