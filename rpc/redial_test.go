package rpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// Issue 32 point 4: a client that dials before its replica listens (a CLI
// or an agent started at boot with it) dials again within a few
// milliseconds, not after 50 ms. The dial fails first (nothing listens);
// then the server comes up, and the connection must be ready within
// redialBound of it. gRPC's first retry with the former 50 ms base delay
// came 40 ms after the failure at the soonest (its jitter is 20 %), so
// even the best of three tries failed this; with 1 ms it comes at once.
func TestRedial_RetriesWithinMillisecondsOfTheListener(t *testing.T) {
	const redialBound = 25 * time.Millisecond
	best := time.Hour
	for range 3 { // the best of three: a loaded machine delays some
		best = min(best, readyAfterListen(t))
	}
	if best > redialBound {
		t.Fatalf("ready %v after the listener came up (best of 3), want within %v", best, redialBound)
	}
}

// readyAfterListen dials an address nothing listens on, waits for the
// dial to fail, starts a gRPC server there and returns how long after
// that the connection is ready.
func readyAfterListen(t *testing.T) time.Duration {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), Redial())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc.Connect()
	waitState(ctx, t, cc, connectivity.TransientFailure)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	up := time.Now()
	s := grpc.NewServer()
	go s.Serve(ln)
	defer s.Stop()
	waitState(ctx, t, cc, connectivity.Ready)
	return time.Since(up)
}

// waitState waits until cc is in want, asking it to connect whenever it
// goes idle (gRPC's channel does after a failed dial's backoff).
func waitState(ctx context.Context, t *testing.T, cc *grpc.ClientConn, want connectivity.State) {
	t.Helper()
	for {
		s := cc.GetState()
		if s == want {
			return
		}
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("connection still %v, want %v", s, want)
		}
	}
}
