package servercmd

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/server/ui"
)

// Requirement: with TLS the dashboard is HTTPS with the replica's
// certificate, requires a client certificate from the CA, and lets an
// operator read the overview while an agent gets 403 naming it.
func TestDashboardServedOverMTLS(t *testing.T) {
	c := clustertest.New(t, 1)
	node := c.WaitLeader(10 * time.Second)
	ca := rpctest.NewCA(t)
	tc, err := rpc.ServerTLSConfig(ca.IssueIdentity(t, "replica", identity.Replica, node.ID(), identity.ServerSAN))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveUI(connlimit.Wrap(lis, connlimit.Config{}), tc, identity.None, node, c.FSM(node.ID()), nil, "127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer stop()
	get := func(role identity.Role, name string) (int, string) {
		cfg, err := rpc.ClientTLSConfig(ca.IssueIdentity(t, name, role, name), identity.ServerSAN)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + lis.Addr().String() + "/api/overview")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get(identity.Operator, "alice")
	var o ui.Overview
	if code != http.StatusOK || json.Unmarshal([]byte(body), &o) != nil || o.Leader != node.ID() {
		t.Fatalf("operator: status %d body %q; want the overview naming leader %s", code, body, node.ID())
	}
	if code, body := get(identity.Agent, "agent_A"); code != http.StatusForbidden || !strings.Contains(body, "agent agent_A") {
		t.Fatalf("agent: status %d body %q; want 403 naming agent agent_A", code, body)
	}
}

// Requirement (issue 31 point 5): the agents' load reports live in the
// leader's memory only, yet a follower's dashboard shows them: the
// dashboard asks its replica, which proxies to the leader. Without the
// load source the CPU and free-memory columns stay empty.
func TestFollowerDashboardShowsTheLeadersAgentLoad(t *testing.T) {
	c := testcluster.New(t, 3)
	leader := c.WaitServing(20 * time.Second)
	var follower string
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
			break
		}
	}
	cc, err := grpc.NewClient(c.Addr(leader), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_A", ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
		AgentName: "agent_A", CpuUsage: &ankbase.CpuUsage{CpuUsage: 37}, FreeMemory: &ankbase.FreeMemory{FreeMemory: 4096}}}}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveUI(connlimit.Wrap(lis, connlimit.Config{}), nil, identity.None, c.Node(follower), c.FSM(follower), nil, c.Addr(follower),
		grpc.WithTransportCredentials(insecure.NewCredentials()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer stop()
	var last string
	testwait.For(t, 15*time.Second, func() bool {
		resp, err := http.Get("http://" + lis.Addr().String() + "/api/overview")
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = string(b)
		var o ui.Overview
		if json.Unmarshal(b, &o) != nil {
			return false
		}
		for _, a := range o.Agents {
			if a.Name == "agent_A" && a.CPUUsage != nil && *a.CPUUsage == 37 && a.FreeMemory != nil && *a.FreeMemory == 4096 {
				return true
			}
		}
		return false
	}, "follower %s's dashboard shows agent_A with cpu 37 and free memory 4096; last overview %s", follower, testwait.Lazy(func() string { return last }))
}
