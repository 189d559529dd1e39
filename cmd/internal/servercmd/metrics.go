package servercmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/server/metrics"
)

// version is the binary's version, carried in gossip metadata.
var version = buildinfo.Version

// metricsServing says where and how the metrics are served.
type metricsServing struct {
	// addr is --metrics-address; empty serves nothing. One without a
	// host is bound on loopback (metricsListenAddress).
	addr  string
	debug bool
	caps  connlimit.Limits
	// tls, when set, serves https with the replica's certificates and
	// requires a client certificate of its CA, of one of roles (untyped
	// certificates taking the role untyped).
	tls     *tls.Config
	roles   []identity.Role
	untyped identity.Role
}

// serveMetrics serves /metrics as ms says (nothing when ms.addr is empty)
// and returns the function that stops it.
func serveMetrics(ms metricsServing, set *metrics.Set, node *cluster.Node, log *slog.Logger) (func(), error) {
	set.CollectRaft(node.Stats)
	set.CollectLeader(func() string { _, id := node.Leader(); return id })
	set.CollectRefusals(node.RefusedHandshakes, node.RefusedEntries)
	collectFastFailover(set, node)
	if ms.addr == "" {
		return func() {}, nil
	}
	// Raft's and memberlist's own metrics, through go-metrics' global.
	if err := metrics.ExportGoMetrics(set.Registry); err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	raw, err := net.Listen("tcp", metricsListenAddress(ms.addr))
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", ms.addr, err)
	}
	lis := connlimit.Wrap(raw, connlimit.Config{Name: "metrics", Limits: ms.caps, Logger: log})
	set.CollectListeners(lis)
	mux := http.NewServeMux()
	mux.Handle("/metrics", set.Registry.Handler())
	if ms.debug {
		// Go's profiler, as Nomad's enable_debug: for diagnosing a replica,
		// never on by default.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// ReadHeaderTimeout also bounds the TLS handshake (net/http takes the
	// shortest of its read and write timeouts for it).
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: httpIdleTimeout}
	scheme := "http"
	if ms.tls != nil {
		scheme = "https"
		hs.TLSConfig = ms.tls.Clone()
		hs.Handler = requireRoles(mux, ms.roles, ms.untyped)
	} else if a, ok := lis.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn("metrics served WITHOUT TLS on " + lis.Addr().String() + ", beyond this host: anyone who reaches it reads replica ids, agent names and refusal counts; bind it to loopback or use --metrics-tls")
	}
	stop := serveHTTP(hs, lis, "metrics endpoint", log)
	log.Info("metrics", "url", scheme+"://"+lis.Addr().String()+"/metrics")
	return stop, nil
}

// serveHTTP serves hs on lis, over TLS when hs has a TLS config, until
// the returned function shuts it down (within 2 s) and waits for it.
func serveHTTP(hs *http.Server, lis net.Listener, what string, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if hs.TLSConfig != nil {
			err = hs.ServeTLS(lis, "", "")
		} else {
			err = hs.Serve(lis)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn(what+" stopped", "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}
}

// requireRoles serves h only to a client certificate whose identity has
// one of roles; any other gets 403 naming it. The TLS handshake already
// refused a client without a certificate of the CA.
func requireRoles(h http.Handler, roles []identity.Role, untyped identity.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "forbidden: the metrics need a client certificate", http.StatusForbidden)
			return
		}
		id, err := identity.FromChains(r.TLS.VerifiedChains, untyped)
		if err != nil {
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		if !slices.Contains(roles, id.Role) {
			http.Error(w, fmt.Sprintf("forbidden: %s may not read the metrics (roles %v only; --metrics-roles)", id, roles), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// collectFastFailover exposes what the fast failover did (cluster
// fastfail.go): the elections this replica started at once as the
// successor of a leader whose process is gone or stopped, and its probes
// of the leader's Raft port, by outcome.
func collectFastFailover(set *metrics.Set, node *cluster.Node) {
	if set == nil {
		return
	}
	set.Registry.NewCounterFunc("grapnel_raft_fast_failover_total",
		"Elections this replica started at once as the successor of a leader whose process is gone (its Raft port refused) or stopped (silent for a heartbeat interval and a half, about 190 ms by default, its port taking a connection it never answered; docs/replication.md).", nil,
		func() float64 { return float64(node.FastFailover().Campaigns) })
	const help = "Dials to the leader's Raft port after the leader's connection to this replica ended or it was silent for a heartbeat interval and a half (about 190 ms by default), by outcome: refused (the leader's process is gone), frozen (the port took the connection, the process never answered) or other (it answered, timed out, or the link is cut)."
	set.Registry.NewCounterFunc("grapnel_raft_leader_probes_total", help, map[string]string{"outcome": "refused"},
		func() float64 { return float64(node.FastFailover().Refused) })
	set.Registry.NewCounterFunc("grapnel_raft_leader_probes_total", help, map[string]string{"outcome": "frozen"},
		func() float64 { return float64(node.FastFailover().Frozen) })
	set.Registry.NewCounterFunc("grapnel_raft_leader_probes_total", help, map[string]string{"outcome": "other"},
		func() float64 { f := node.FastFailover(); return float64(f.Probes - f.Refused - f.Frozen) })
}
