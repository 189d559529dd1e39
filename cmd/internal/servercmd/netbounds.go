package servercmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/identity"
)

// The default caps of each listener (issue 27, hole 4). A vehicle has
// tens of agents, each holding one connection to each replica, a few
// CLIs and a follower's proxy connection: the gRPC caps leave room for a
// bench's 64 clients on one host and for every ECU, while a flood from
// one source holds at most PerSource descriptors. A Raft peer holds a
// few connections (one pooled, the pipeline, one per RPC beyond them,
// admission probes); Prometheus one per scraper; a browser six, or one
// over HTTP/2.
var (
	defaultGRPCConns    = connlimit.Limits{PerSource: 128, Total: 512}
	defaultRaftConns    = connlimit.Limits{PerSource: 32, Total: 128}
	defaultMetricsConns = connlimit.Limits{PerSource: 8, Total: 32}
	defaultUIConns      = connlimit.Limits{PerSource: 32, Total: 128}
)

// fdReserve is what the caps leave of RLIMIT_NOFILE for everything but
// the connections the listeners accept: the Raft log's segment files and
// snapshots, gossip's sockets and the connections memberlist accepts
// (each for at most its TCP timeout), this replica's own dials (Raft,
// the follower proxy, admission probes, the dashboard's log client),
// inotify, the log and what the process collector reads. A replica of a
// quiet three-replica cluster holds about 20 in all.
const fdReserve = 256

// minGRPCConns is the fewest connections a replica starts its gRPC port
// with; a lower RLIMIT_NOFILE is refused at start.
const minGRPCConns = 16

// httpIdleTimeout closes a keep-alive connection of the metrics or the
// dashboard that carries no request for this long: net/http keeps one
// forever without it. Prometheus scrapes every 15 to 60 s and reuses its
// connection within it.
const httpIdleTimeout = 2 * time.Minute

// connCaps are the caps the replica's listeners run with.
type connCaps struct {
	grpc, raft, metrics, ui connlimit.Limits
	// nofile is RLIMIT_NOFILE; reserve what the gRPC total left of it.
	nofile, reserve int
	// lowered says the gRPC total was lowered to fit nofile.
	lowered bool
}

// validateBounds checks the caps and deadlines of issue 27.
func (c config) validateBounds() error {
	for _, l := range []struct {
		flag, perFlag string
		total, per    int
	}{
		{"--grpc-max-conns", "--grpc-max-conns-per-source", c.GRPCMaxConns, c.GRPCMaxConnsPerSource},
		{"--raft-max-conns", "--raft-max-conns-per-source", c.RaftMaxConns, c.RaftMaxConnsPerSource},
		{"--metrics-max-conns", "--metrics-max-conns-per-source", c.MetricsMaxConns, c.MetricsMaxConnsPerSource},
		{"--ui-max-conns", "--ui-max-conns-per-source", c.UIMaxConns, c.UIMaxConnsPerSource},
	} {
		switch {
		case l.total < 1 || l.total > 1<<20:
			return fmt.Errorf("%s %d: must be 1 to %d", l.flag, l.total, 1<<20)
		case l.per < 1 || l.per > l.total:
			return fmt.Errorf("%s %d: must be 1 to %s (%d)", l.perFlag, l.per, l.flag, l.total)
		}
	}
	if c.GRPCHandshakeTimeout < 100*time.Millisecond || c.GRPCHandshakeTimeout > 2*time.Minute {
		return fmt.Errorf("--grpc-handshake-timeout %v: must be 100ms to 2m", c.GRPCHandshakeTimeout)
	}
	if c.HelloTimeout < 100*time.Millisecond || c.HelloTimeout > 5*time.Minute {
		return fmt.Errorf("--hello-timeout %v: must be 100ms to 5m", c.HelloTimeout)
	}
	if c.MaxStreamsPerAgent < 2 {
		return fmt.Errorf("--max-streams-per-agent %d: must be at least 2 (an agent's new stream replaces its old one, which ends a moment later)", c.MaxStreamsPerAgent)
	}
	if c.MaxStreamsPerClient < 1 {
		return fmt.Errorf("--max-streams-per-client %d: must be at least 1", c.MaxStreamsPerClient)
	}
	if c.MaxStreams < c.MaxStreamsPerAgent || c.MaxStreams < c.MaxStreamsPerClient {
		return fmt.Errorf("--max-streams %d: must be at least --max-streams-per-agent (%d) and --max-streams-per-client (%d)", c.MaxStreams, c.MaxStreamsPerAgent, c.MaxStreamsPerClient)
	}
	if _, err := c.metricsRoles(); err != nil {
		return err
	}
	if c.MetricsTLS && c.Insecure {
		return errors.New("--metrics-tls: needs the replica's certificates; not with --insecure")
	}
	return nil
}

// metricsRoles are the roles that may read the metrics over TLS.
func (c config) metricsRoles() ([]identity.Role, error) {
	if len(c.MetricsRoles) == 0 {
		return nil, errors.New("--metrics-roles: empty; name at least one role (operator, commander, replica or agent)")
	}
	var out []identity.Role
	for _, s := range c.MetricsRoles {
		r, err := identity.ParseRole(s)
		if err != nil {
			return nil, fmt.Errorf("--metrics-roles %q: %w", s, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// connCaps sizes the listeners for a process that may hold nofile
// descriptors: the gRPC port, the one an attacker reaches with no
// certificate, gets what is left after the other listeners' totals (of
// those that are on) and fdReserve, at most its configured total.
func (c config) connCaps(nofile uint64) (connCaps, error) {
	caps := connCaps{
		grpc:    connlimit.Limits{PerSource: c.GRPCMaxConnsPerSource, Total: c.GRPCMaxConns},
		raft:    connlimit.Limits{PerSource: c.RaftMaxConnsPerSource, Total: c.RaftMaxConns},
		metrics: connlimit.Limits{PerSource: c.MetricsMaxConnsPerSource, Total: c.MetricsMaxConns},
		ui:      connlimit.Limits{PerSource: c.UIMaxConnsPerSource, Total: c.UIMaxConns},
		nofile:  int(min(nofile, 1<<30)),
	}
	caps.reserve = fdReserve + caps.raft.Total
	if c.MetricsAddress != "" {
		caps.reserve += caps.metrics.Total
	}
	if c.UIAddress != "" {
		caps.reserve += caps.ui.Total
	}
	left := caps.nofile - caps.reserve
	if left < minGRPCConns {
		return connCaps{}, fmt.Errorf("RLIMIT_NOFILE %d leaves %d descriptors for gRPC connections, fewer than %d: %d are kept for the Raft port (--raft-max-conns), the metrics and the dashboard (--metrics-max-conns, --ui-max-conns) and %d for files and gossip; raise the limit (LimitNOFILE= in the unit) or lower those caps",
			caps.nofile, max(left, 0), minGRPCConns, caps.reserve-fdReserve, fdReserve)
	}
	if left < caps.grpc.Total {
		caps.grpc.Total, caps.lowered = left, true
		caps.grpc.PerSource = min(caps.grpc.PerSource, left)
	}
	return caps, nil
}

// openFileLimit is the process's RLIMIT_NOFILE (Go raises the soft limit
// to the hard one at start).
func openFileLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	return r.Cur, nil
}

// metricsListenAddress is where the metrics are bound: an address
// without a host (":9100") is loopback's, so that turning the metrics on
// exposes nothing to the network by itself.
func metricsListenAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// logCaps says at start what the listeners are capped at.
func logCaps(log *slog.Logger, caps connCaps) {
	log.Info("connection caps", "rlimit_nofile", caps.nofile, "reserved", caps.reserve,
		"grpc", caps.grpc.Total, "grpc_per_source", caps.grpc.PerSource,
		"raft", caps.raft.Total, "raft_per_source", caps.raft.PerSource,
		"metrics", caps.metrics.Total, "dashboard", caps.ui.Total)
	if caps.lowered {
		log.Warn("the gRPC connection cap is lowered to what RLIMIT_NOFILE leaves; raise the limit (LimitNOFILE=) to serve more",
			"grpc", caps.grpc.Total, "rlimit_nofile", caps.nofile, "reserved", caps.reserve)
	}
}
