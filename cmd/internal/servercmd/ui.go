package servercmd

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/server"
	"github.com/grapnel-io/grapnel/server/ui"
)

// listenUI opens the dashboard's listener (nil when addr is empty), before
// the node starts, so that gossip announces the address it really has;
// it holds at most caps connections.
func listenUI(addr string, caps connlimit.Limits, log *slog.Logger) (*connlimit.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui-address %s: %w", addr, err)
	}
	return connlimit.Wrap(lis, connlimit.Config{Name: "dashboard", Limits: caps, Logger: log}), nil
}

// serveUI serves the dashboard on lis (nothing when lis is nil): over
// mTLS with the replica's certificates when tc is set, the same CA
// verifying the browser's client certificate, else plain HTTP. The
// dashboard is told about every applied command through the FSM's
// observer; logs and the agents' load (the leader's memory) come from a
// CliConnection to this replica's own gRPC address (grpcAddr), which a
// follower proxies to the leader, dialled on first use with creds; the
// agents' releases from releases (the leader's memory). It returns the function
// that stops it.
func serveUI(lis *connlimit.Listener, tc *tls.Config, untyped identity.Role, node *cluster.Node, f *fsm.FSM, releases func() map[string]string, grpcAddr string,
	creds grpc.DialOption, log *slog.Logger) func() {
	if lis == nil {
		return func() {}
	}
	feed := changefeed.New()
	f.SetObserver(func(fsm.MessageType, uint64) { feed.Notify() })
	var (
		dialOnce sync.Once
		cc       *grpc.ClientConn
		dialErr  error
	)
	dial := func() (*grpc.ClientConn, error) {
		dialOnce.Do(func() { cc, dialErr = grpc.NewClient(grpcAddr, creds) })
		return cc, dialErr
	}
	h := ui.New(ui.Config{Node: node, FSM: f, Feed: feed, Timeline: server.WorkloadTimeline,
		Logs: ui.GRPCLogs(dial), AgentLoads: ui.GRPCAgentLoads(dial), AgentReleases: releases, Untyped: untyped, Logger: log})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: httpIdleTimeout}
	scheme := "https"
	if tc == nil {
		scheme = "http"
		log.Warn("dashboard served WITHOUT TLS (--insecure): anyone who reaches " + lis.Addr().String() + " sees the whole cluster")
	} else {
		hs.TLSConfig = tc.Clone()
	}
	stop := serveHTTP(hs, lis, "dashboard", log)
	log.Info("dashboard", "url", scheme+"://"+lis.Addr().String()+"/")
	return func() {
		h.Close()
		stop()
		if cc != nil {
			cc.Close()
		}
	}
}
