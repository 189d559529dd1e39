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
// On a vehicle LAN a failed dial is cheap (a refused connect is one RST):
// retry after 1 ms and let the wait grow by a fifth each time, to at most
// a second (reached after about 6 s), and give up on a dial that has not
// completed in a second. A CLI or an agent started at boot with its
// replica dials before the replica listens, 15-20 ms after its exec on a
// quiet machine: the first retry at 50 ms cost such a client up to 50 ms
// more to its first answer, and one at 40-60 ms before a replica that
// listened later waited for the next, at 130 ms (issue 32). Growing by a
// fifth keeps the gap between two dials under a fifth of the time already
// waited (8 ms at 35 ms); doubling from 1 ms would make it as long as
// that time (32 ms after 31 ms).
func Redial() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1.2, Jitter: 0.2, MaxDelay: time.Second},
		MinConnectTimeout: time.Second,
	})
}
