package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/server/metrics"
)

// version is the binary's version, carried in gossip metadata.
var version = buildinfo.Version

// serveMetrics serves /metrics on addr (nothing when addr is empty) and
// returns the function that stops it.
func serveMetrics(addr string, debug bool, set *metrics.Set, node *cluster.Node, log *slog.Logger) (func(), error) {
	set.CollectRaft(node.Stats)
	set.CollectRefusals(node.RefusedHandshakes, node.RefusedEntries)
	if addr == "" {
		return func() {}, nil
	}
	// Raft's and memberlist's own metrics, through go-metrics' global.
	if err := metrics.ExportGoMetrics(set.Registry); err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", set.Registry.Handler())
	if debug {
		// Go's profiler, as Nomad's enable_debug: for diagnosing a replica,
		// never on by default.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics endpoint stopped", "error", err)
		}
	}()
	log.Info("metrics", "url", "http://"+lis.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}, nil
}
