package servercmd

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/server/metrics"
)

// insecureConfig loads the config from args with --insecure and an empty
// config file.
func insecureConfig(t *testing.T, args ...string) (config, error) {
	t.Helper()
	return loadConfig(append([]string{"-k", "-x", writeFile(t, "")}, args...), env(nil))
}

// Every new bound has a flag; a bad value is refused naming it.
func TestBoundFlags(t *testing.T) {
	cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, "grpc_max_conns: 64\nhello_timeout: 3s\nmetrics_roles: [operator, commander]\n"),
		"--grpc-max-conns-per-source", "8", "--grpc-handshake-timeout", "2s",
		"--raft-max-conns", "40", "--raft-max-conns-per-source", "10", "--max-streams-per-agent", "3",
		"--max-streams-per-client", "9"}, env(map[string]string{"GRAPNEL_SERVER_MAX_STREAMS": "100"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GRPCMaxConns != 64 || cfg.GRPCMaxConnsPerSource != 8 || cfg.GRPCHandshakeTimeout != 2*time.Second ||
		cfg.RaftMaxConns != 40 || cfg.RaftMaxConnsPerSource != 10 || cfg.HelloTimeout != 3*time.Second ||
		cfg.MaxStreamsPerAgent != 3 || cfg.MaxStreamsPerClient != 9 || cfg.MaxStreams != 100 || len(cfg.MetricsRoles) != 2 {
		t.Fatalf("config %+v", cfg)
	}
	d := defaults()
	if d.GRPCMaxConns != 512 || d.GRPCMaxConnsPerSource != 128 || d.GRPCHandshakeTimeout != 5*time.Second || d.HelloTimeout != 10*time.Second ||
		d.MaxStreamsPerAgent != 4 || d.MaxStreamsPerClient != 128 || d.MaxStreams != 512 || d.MetricsTLS || len(d.MetricsRoles) != 1 {
		t.Fatalf("defaults %+v", d)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grpc-max-conns", "0"}, "--grpc-max-conns 0"},
		{[]string{"--grpc-max-conns-per-source", "2000"}, "--grpc-max-conns-per-source 2000: must be 1 to --grpc-max-conns (512)"},
		{[]string{"--raft-max-conns-per-source", "0"}, "--raft-max-conns-per-source 0"},
		{[]string{"--metrics-max-conns", "-1"}, "--metrics-max-conns -1"},
		{[]string{"--ui-max-conns-per-source", "999"}, "--ui-max-conns-per-source 999"},
		{[]string{"--grpc-handshake-timeout", "0s"}, "--grpc-handshake-timeout 0s"},
		{[]string{"--hello-timeout", "1h"}, "--hello-timeout 1h0m0s"},
		{[]string{"--max-streams-per-agent", "1"}, "--max-streams-per-agent 1: must be at least 2"},
		{[]string{"--max-streams", "3"}, "--max-streams 3"},
		{[]string{"--metrics-roles", "admin"}, `--metrics-roles "admin"`},
		{[]string{"--metrics-tls"}, "--metrics-tls: needs the replica's certificates; not with --insecure"},
	} {
		if _, err := insecureConfig(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}

// Requirement (issue 27, hole 4): the gRPC cap is sized from
// RLIMIT_NOFILE: what the limit leaves after the other listeners' caps
// (of those that are on) and the reserve, at most the configured total;
// a limit that leaves too little is refused naming what to change.
func TestConnCapsFollowTheFileLimit(t *testing.T) {
	cfg := defaults()
	caps, err := cfg.connCaps(65536)
	if err != nil || caps.lowered || caps.grpc != defaultGRPCConns || caps.raft != defaultRaftConns || caps.reserve != fdReserve+defaultRaftConns.Total {
		t.Fatalf("at 65536: %+v, %v", caps, err)
	}
	cfg.MetricsAddress, cfg.UIAddress = ":9100", ":8443"
	reserve := fdReserve + defaultRaftConns.Total + defaultMetricsConns.Total + defaultUIConns.Total
	caps, err = cfg.connCaps(1024)
	if err != nil || !caps.lowered || caps.grpc.Total != 1024-reserve || caps.grpc.PerSource != defaultGRPCConns.PerSource || caps.reserve != reserve {
		t.Fatalf("at 1024 with metrics and dashboard: %+v, %v; want gRPC %d", caps, err, 1024-reserve)
	}
	caps, err = cfg.connCaps(uint64(reserve + 20))
	if err != nil || caps.grpc.Total != 20 || caps.grpc.PerSource != 20 {
		t.Fatalf("20 left: %+v, %v", caps, err)
	}
	if _, err := cfg.connCaps(uint64(reserve + minGRPCConns - 1)); err == nil || !strings.Contains(err.Error(), "RLIMIT_NOFILE") || !strings.Contains(err.Error(), "LimitNOFILE") {
		t.Fatalf("too low a limit: %v", err)
	}
}

// Requirement (issue 27, hole 9): an address without a host binds the
// metrics on loopback; one with a host is taken as it is.
func TestMetricsAddressWithoutHostIsLoopback(t *testing.T) {
	for in, want := range map[string]string{":9100": "127.0.0.1:9100", "0.0.0.0:9100": "0.0.0.0:9100", "10.0.0.1:9100": "10.0.0.1:9100",
		"[::1]:9100": "[::1]:9100", "localhost:9100": "localhost:9100"} {
		if got := metricsListenAddress(in); got != want {
			t.Errorf("metricsListenAddress(%q) = %q, want %q", in, got, want)
		}
	}
	c := clustertest.New(t, 1)
	node := c.WaitLeader(10 * time.Second)
	set := metrics.NewSet()
	var logged syncbuf.Buffer
	_, port, _ := net.SplitHostPort(freeAddr(t))
	stop, err := serveMetrics(metricsServing{addr: ":" + port, caps: defaultMetricsConns}, set, node, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !strings.Contains(logged.String(), "url=http://127.0.0.1:"+port+"/metrics") {
		t.Fatalf("the metrics are not on loopback: %s", logged.String())
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape on loopback: %v %v", resp, err)
	}
	resp.Body.Close()
	if strings.Contains(logged.String(), "WITHOUT TLS") {
		t.Fatalf("a warning for loopback: %s", logged.String())
	}
}

// Requirement (issue 27, hole 9): with --metrics-tls the metrics are
// https with the replica's certificate; a client without a certificate
// fails the handshake, an agent's certificate gets 403 naming it, an
// operator's is served, and a certificate of the allowed roles only.
func TestMetricsOverMTLS(t *testing.T) {
	c := clustertest.New(t, 1)
	node := c.WaitLeader(10 * time.Second)
	ca := rpctest.NewCA(t)
	store, err := rpc.NewTLSStore(ca.IssueIdentity(t, "replica", identity.Replica, node.ID(), identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	set := metrics.NewSet()
	addr := freeAddr(t)
	stop, err := serveMetrics(metricsServing{addr: addr, caps: defaultMetricsConns, tls: rpc.ServerTLSConfigFrom(store),
		roles: []identity.Role{identity.Operator}, untyped: identity.Agent}, set, node, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(cfg *tls.Config) (int, string, error) {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/metrics")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	client := func(role identity.Role, name string) *tls.Config {
		cfg, err := rpc.ClientTLSConfig(ca.IssueIdentity(t, name, role, name), identity.ServerSAN)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if code, body, err := get(client(identity.Operator, "prometheus")); err != nil || code != http.StatusOK || !strings.Contains(body, "grapnel_raft_is_leader 1") {
		t.Fatalf("operator: %d %v; body %.200q", code, err, body)
	}
	if code, body, err := get(client(identity.Agent, "agent_A")); err != nil || code != http.StatusForbidden || !strings.Contains(body, "agent agent_A may not read the metrics") {
		t.Fatalf("agent: %d %v %.200q; want 403 naming agent agent_A", code, err, body)
	}
	anon, err := rpc.ClientTLSConfig(ca.IssueIdentity(t, "x", identity.Operator, "x"), identity.ServerSAN)
	if err != nil {
		t.Fatal(err)
	}
	anon.Certificates = nil
	if _, _, err := get(anon); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain http was served")
		}
	}
}
