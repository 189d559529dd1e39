package servercmd

import (
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
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
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
