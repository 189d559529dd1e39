package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

// Requirement (issue 28, point 1): the release of every replica and agent
// is visible. A grapnel-agent of this build shows its release in `get
// agents` (table and -o json), an agent that says no release (an Ankaios
// agent) shows "ankaios"; `cluster members -o json` carries each
// replica's release; the leader's /metrics has both.
func TestReleasesEndToEnd(t *testing.T) {
	var (
		mu   sync.Mutex
		sets = map[string]*metrics.Set{}
	)
	cl := testcluster.NewConfigured(t, 1, func(id string, cfg *server.Config) {
		mu.Lock()
		defer mu.Unlock()
		sets[id] = metrics.NewSet()
		cfg.Metrics = sets[id]
	})
	leader := cl.WaitServing(20 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{
			Name: "agent_A", Servers: cl.Addrs(), Insecure: true, RunFolder: t.TempDir(),
			Runtimes: []string{agent.RuntimeProcess}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the agent did not stop")
		}
	})
	// An Ankaios agent's hello: no incarnation, no release.
	cc, err := grpc.NewClient(cl.Addr(leader), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := wire.KindAgent.Open(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_ank", ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()

	var out string
	testwait.For(t, 20*time.Second, func() bool {
		_, out, _ = cliRun(cl, "get", "agents")
		return strings.Contains(out, "agent_A") && strings.Contains(out, "agent_ank")
	}, "both agents listed")
	rows := map[string][]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	if header[len(header)-1] != "RELEASE" {
		t.Fatalf("no RELEASE column:\n%s", out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	if r := rows["agent_A"]; r[len(r)-1] != buildinfo.Version {
		t.Errorf("agent_A's release: row %q, want %s\n%s", r, buildinfo.Version, out)
	}
	if r := rows["agent_ank"]; r[len(r)-1] != server.ReleaseAnkaios {
		t.Errorf("agent_ank's release: row %q, want %s\n%s", r, server.ReleaseAnkaios, out)
	}

	code, out, stderr := cliRun(cl, "get", "agents", "-o", "json")
	var agents struct {
		Agents []struct {
			Name, Release, Mode string
			Workloads           int
		}
	}
	if err := json.Unmarshal([]byte(out), &agents); code != exitOK || err != nil {
		t.Fatalf("get agents -o json: exit %d, %v, stdout %q, stderr %q", code, err, out, stderr)
	}
	got := map[string]string{}
	for _, a := range agents.Agents {
		got[a.Name] = a.Release
	}
	if got["agent_A"] != buildinfo.Version || got["agent_ank"] != server.ReleaseAnkaios || len(got) != 2 {
		t.Fatalf("get agents -o json: %s", out)
	}
	if code, out, _ := cliRun(cl, "get", "agents", "-o", "yaml"); code != exitOK || !strings.Contains(out, "release: "+buildinfo.Version) {
		t.Fatalf("get agents -o yaml: exit %d\n%s", code, out)
	}
	if code, _, stderr := cliRun(cl, "get", "agents", "-o", "xml"); code == exitOK || !strings.Contains(stderr, `-o "xml"`) {
		t.Fatalf("get agents -o xml: exit %d, stderr %q", code, stderr)
	}

	// The replicas' releases (the test cluster's replicas announce "test").
	code, out, stderr = cliRun(cl, "cluster", "members", "-o", "json")
	var status struct {
		Members []struct{ ID, Release, Version string }
	}
	if err := json.Unmarshal([]byte(out), &status); code != exitOK || err != nil || len(status.Members) != 1 {
		t.Fatalf("cluster members -o json: exit %d, %v, stdout %q, stderr %q", code, err, out, stderr)
	}
	if m := status.Members[0]; m.Release != "test" || m.Version != "test" {
		t.Fatalf("member %+v: want release test", m)
	}
	if _, out, _ := cliRun(cl, "cluster", "members"); !strings.Contains(out, "RELEASE") {
		t.Fatalf("cluster members: no RELEASE column:\n%s", out)
	}

	mu.Lock()
	set := sets[leader]
	mu.Unlock()
	var b bytes.Buffer
	if _, err := set.Registry.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`grapnel_agent_release{agent="agent_A",release="` + buildinfo.Version + `"} 1`,
		`grapnel_agent_release{agent="agent_ank",release="ankaios"} 1`,
		`grapnel_replica_release{release="test",replica="` + leader + `"} 1`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}
