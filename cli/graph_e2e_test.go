package cli

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// get graph against a real grapnel-server: the graph is built from the
// complete state the server returns, with the states the scripted agent
// reported, a templated agent rendered, and a missing dependency marked.
func TestGetGraphEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, out := e2eSession(t, addr)
	ctx := context.Background()
	startAgentConnected(t, s, addr, "agent_A")

	manifest := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
workloads:
  db:
    agent: agent_A
    runtime: podman
    runtimeConfig: "image: db"
  web:
    agent: "{{node.name}}"
    configs: {node: placement}
    runtime: podman
    runtimeConfig: "image: web"
    dependencies: {db: ADD_COND_RUNNING}
  report:
    agent: agent_offline
    runtime: podman
    runtimeConfig: "image: report"
    dependencies: {web: ADD_COND_SUCCEEDED, archive: ADD_COND_FAILED}
configs:
  placement: {name: agent_A}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, []string{manifest}, nil, false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool {
		out.Reset()
		if err := s.GetGraph(ctx, GraphOptions{Format: GraphJSON}); err != nil {
			return false
		}
		var g graph.Graph
		if json.Unmarshal([]byte(out.String()), &g) != nil {
			return false
		}
		web, db := g.Node("web"), g.Node("db")
		return web != nil && db != nil && web.State == "Running" && db.State == "Running"
	}, "web and db to run in the graph")

	var g graph.Graph
	if err := json.Unmarshal([]byte(out.String()), &g); err != nil {
		t.Fatal(err)
	}
	if n := g.Node("web"); n.Agent != "agent_A" || len(n.Instances) != 1 {
		t.Errorf("web %+v; want on the rendered agent_A with one instance", n)
	}
	if n := g.Node("report"); n.State != "Pending" || n.SubState != "Initial" || n.Agent != "agent_offline" {
		t.Errorf("report %+v; want Pending(Initial) on agent_offline", n)
	}
	if n := g.Node("archive"); n == nil || n.Kind != graph.KindMissing {
		t.Errorf("archive %+v; want a missing node", n)
	}
	wantEdges := []graph.Edge{
		{Kind: graph.EdgeDependency, From: "report", To: "archive", Condition: "ADD_COND_FAILED", Missing: true},
		{Kind: graph.EdgeDependency, From: "report", To: "web", Condition: "ADD_COND_SUCCEEDED"},
		{Kind: graph.EdgeDependency, From: "web", To: "db", Condition: "ADD_COND_RUNNING"},
		{Kind: graph.EdgeDelete, From: "db", To: "web", Condition: "DEL_COND_NOT_PENDING_NOR_RUNNING"},
	}
	if len(g.Edges) != len(wantEdges) {
		t.Fatalf("edges %+v; want %+v", g.Edges, wantEdges)
	}
	for i := range wantEdges {
		if g.Edges[i] != wantEdges[i] {
			t.Errorf("edge %d = %+v; want %+v", i, g.Edges[i], wantEdges[i])
		}
	}
	if len(g.Agents) != 2 || g.Agents[0].Name != "agent_A" || !g.Agents[0].Connected || g.Agents[1].Connected {
		t.Errorf("agents %+v; want agent_A connected, agent_offline not", g.Agents)
	}

	out.Reset()
	if err := s.GetGraph(ctx, GraphOptions{Format: GraphDOT}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`subgraph "cluster_agent_A" {`, `label="agent_offline (not connected)"`, `"web" -> "db" [label="running"]`, `"db" -> "web" [label="not pending nor running", style=dashed`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("DOT lacks %s:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := s.GetGraph(ctx, GraphOptions{Format: GraphSVG}); err != nil {
		t.Fatal(err)
	}
	nodes := 0
	dec := xml.NewDecoder(strings.NewReader(out.String()))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == "node" {
					nodes++
				}
			}
		}
	}
	if nodes != 4 {
		t.Errorf("SVG has %d nodes; want 4 (db, web, report, archive)", nodes)
	}
}
