package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
)

// helloAs opens an agent stream saying hello with the given release and
// incarnation and waits until the agent is in the agent map.
func (ts *testServer) helloAs(name, release string, incarnation uint64) *testConn {
	c := ts.dial(wire.KindAgent)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: name, ProtocolVersion: rpc.ProtocolVersion, GrapnelIncarnation: incarnation, GrapnelRelease: release}}})
	c.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil })
	testwait.For(ts.t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents[name] })
		return ok
	}, "agent %s in the agent map", name)
	return c
}

// agentReleases asks the leader's Cluster service for the agents'
// releases.
func (ts *testServer) agentReleases() map[string]string {
	ts.t.Helper()
	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		ts.t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := grapnelpb.NewClusterClient(cc).Agents(ctx, &grapnelpb.AgentsRequest{})
	if err != nil {
		ts.t.Fatalf("Cluster.Agents: %v", err)
	}
	out := map[string]string{}
	for _, a := range resp.GetAgents() {
		out[a.GetName()] = a.GetRelease()
	}
	return out
}

func scrape(t *testing.T, set *metrics.Set) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := set.Registry.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Requirement (issue 28, point 1): every agent's release is visible. A
// Grapnel agent's hello announces it (AgentHello.grapnelRelease); the
// leader keeps it in memory, not in the replicated agent map, and serves
// it through Cluster.Agents and grapnel_agent_release. An agent that
// announces none shows a placeholder: ankaios without an incarnation
// either, unknown with one (a Grapnel agent older than releases); a text
// that is not a release shows as invalid and the agent is served all the
// same. An agent that leaves takes its release along.
func TestAgentReleasesInLeaderMemory(t *testing.T) {
	set := metrics.NewSet()
	// A Goodbye gets the reconnect grace (issue 30): a short one, as
	// the test waits for the agent to leave.
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Metrics, c.AgentReconnectGrace = set, 100*time.Millisecond })
	current := ts.helloAs("agent_new", "0.4.0-dev", 1)
	ts.helloAs("agent_ank", "", 0)
	ts.helloAs("agent_old", "", 7)
	ts.helloAs("agent_bad", "v1 {evil=\"x\"}", 3)

	want := map[string]string{"agent_new": "0.4.0-dev", "agent_ank": ReleaseAnkaios, "agent_old": ReleaseUnknown, "agent_bad": ReleaseInvalid}
	got := ts.agentReleases()
	if len(got) != len(want) {
		t.Fatalf("Cluster.Agents: %v, want %v", got, want)
	}
	for name, rel := range want {
		if got[name] != rel {
			t.Errorf("agent %s: release %q, want %q", name, got[name], rel)
		}
	}
	text := scrape(t, set)
	for name, rel := range want {
		if line := `grapnel_agent_release{agent="` + name + `",release="` + rel + `"} 1`; !strings.Contains(text, line) {
			t.Errorf("metrics lack %s:\n%s", line, grep(text, "grapnel_agent_release"))
		}
	}
	// Nothing of it was replicated: the agent map holds tags only.
	ts.store(func(s *state.Store) {
		for name, a := range s.Agents {
			if a.Status.CPUUsage != nil || len(a.Tags) != 0 {
				t.Errorf("agent %s in the replicated map: %+v", name, a)
			}
		}
	})

	// Goodbye: once its grace has passed, the agent leaves the map and
	// its release the memory.
	current.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	if err := current.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { _, ok := ts.agentReleases()["agent_new"]; return !ok }, "agent_new's release forgotten")
	if text := scrape(t, set); strings.Contains(text, `agent="agent_new"`) {
		t.Fatalf("a departed agent keeps its series:\n%s", grep(text, "grapnel_agent_release"))
	}
	// A new life of the agent with another release replaces it.
	ts.helloAs("agent_new", "0.4.1", 2)
	if rel := ts.agentReleases()["agent_new"]; rel != "0.4.1" {
		t.Fatalf("after a restart: %q", rel)
	}
}

// Only the leader hears hellos: a server that does not lead has no
// releases (nil), which the dashboard shows as unknown here.
func TestAgentReleasesNilWhenNotLeading(t *testing.T) {
	s := &Server{}
	if r := s.AgentReleases(); r != nil {
		t.Fatalf("no term, releases %v", r)
	}
}

func grep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
