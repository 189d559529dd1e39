package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// fakeProblems answers List with fixed problems.
type fakeProblems struct {
	grapnelpb.ProblemsClient
	resp *grapnelpb.ProblemsListResponse
}

func (f *fakeProblems) List(context.Context, *grapnelpb.ProblemsListRequest, ...grpc.CallOption) (*grapnelpb.ProblemsListResponse, error) {
	return f.resp, nil
}

// Requirement (issue 16, point 3): `get problems` prints each problem's
// id, kind, since, objects and short description as a table, and every
// field, the long description included, as YAML or JSON.
func TestProblemsOutput(t *testing.T) {
	fake := &fakeProblems{resp: &grapnelpb.ProblemsListResponse{LastId: 4, Problems: []*grapnelpb.Problem{
		{Id: 3, Kind: "MissingDependency", SinceMs: 1_700_000_000_000, Summary: "workload app depends on db, which does not exist",
			Detail: "Add workload db.", Objects: []*grapnelpb.ProblemObject{{Kind: "workload", Name: "app"}, {Kind: "workload", Name: "db"}}},
		{Id: 4, Kind: "AgentGone", SinceMs: 1_700_000_001_500, LastUpdatedMs: 1_700_000_002_000, Summary: "agent agent_B is gone", Detail: "Bring it back.",
			Objects: []*grapnelpb.ProblemObject{{Kind: "agent", Name: "agent_B"}}},
	}}}
	out := &syncbuf.Buffer{}
	p := &Problems{Client: fake, Out: out, Location: time.UTC}
	if err := p.List(context.Background(), "table"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ID   KIND                SINCE                      OBJECTS                     SUMMARY",
		"3    MissingDependency   2023-11-14T22:13:20.000Z   workload app, workload db   workload app depends on db, which does not exist",
		"4    AgentGone           2023-11-14T22:13:21.500Z   agent agent_B               agent agent_B is gone",
	}
	got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i := range got {
		got[i] = strings.TrimRight(got[i], " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant\n%s", out.String(), strings.Join(want, "\n"))
	}

	out.Reset()
	if err := p.List(context.Background(), "yaml"); err != nil {
		t.Fatal(err)
	}
	y := out.String()
	// Problem 3 comes from a leader that sends no lastUpdatedMs: it is
	// its since.
	if !strings.HasPrefix(y, "problems:\n  - id: 3\n    kind: MissingDependency\n    since: \"2023-11-14T22:13:20.000Z\"\n    sinceMs: 1700000000000\n"+
		"    lastUpdated: \"2023-11-14T22:13:20.000Z\"\n    lastUpdatedMs: 1700000000000\n") ||
		!strings.Contains(y, "    lastUpdated: \"2023-11-14T22:13:22.000Z\"\n    lastUpdatedMs: 1700000002000\n") ||
		!strings.Contains(y, "    detail: Add workload db.\n") || !strings.Contains(y, "      - kind: workload\n        name: app\n") {
		t.Fatalf("yaml:\n%s", y)
	}

	out.Reset()
	if err := p.List(context.Background(), "json"); err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Problems []struct {
			ID      uint64 `json:"id"`
			SinceMs int64  `json:"sinceMs"`
			Updated int64  `json:"lastUpdatedMs"`
			Detail  string `json:"detail"`
			Objects []struct{ Kind, Name string }
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out.String()), &parsed); err != nil || len(parsed.Problems) != 2 || parsed.Problems[1].ID != 4 ||
		parsed.Problems[1].SinceMs != 1_700_000_001_500 || parsed.Problems[1].Updated != 1_700_000_002_000 || parsed.Problems[1].Detail != "Bring it back." || parsed.Problems[0].Objects[1].Name != "db" {
		t.Fatalf("json (%v):\n%s", err, out.String())
	}

	if err := p.List(context.Background(), "xml"); err == nil {
		t.Fatal("-o xml was accepted")
	}
}

// Requirement (issue 16, points 3 and 7): against a real server, a
// workload that depends on a workload the manifest lacks shows up in
// `get problems`, and the problem disappears when the workload is
// deleted.
func TestProblemsEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, _ := e2eSession(t, addr)
	ctx := context.Background()
	s.NoWait = true
	manifest := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
workloads:
  app:
    agent: agent_A
    runtime: podman
    runtimeConfig: "image: app"
    dependencies:
      db: ADD_COND_RUNNING
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, []string{manifest}, nil, false); err != nil {
		t.Fatal(err)
	}
	r, err := client.NewResolver(client.Options{Addrs: []string{addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := &syncbuf.Buffer{}
	p := &Problems{Client: r.Problems(), Out: out, Location: time.UTC}
	list := func() string {
		out.Reset()
		if err := p.List(ctx, "table"); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	testwait.For(t, 15*time.Second, func() bool { return strings.Contains(list(), "MissingDependency") }, "the problem of app")
	table := list()
	if !strings.Contains(table, "workload app, workload db") || !strings.HasPrefix(table, "ID ") {
		t.Fatalf("get problems:\n%s", table)
	}
	if err := s.DeleteWorkloads(ctx, []string{"app"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, func() bool { return !strings.Contains(list(), "MissingDependency") }, "the problem resolved")
}
