package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// The operator verbs against a real one-replica server: members in every
// format, snapshot save, then a restore that undoes a later change.
func TestClusterVerbsEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, _ := e2eSession(t, addr)
	ctx := context.Background()
	cc, _, closeFn, err := client.DialCluster(ctx, client.Options{Addrs: []string{addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	out, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	c := &Cluster{Client: cc, Out: out, Err: errOut}

	if err := c.Members(ctx, "table"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "leader") || !strings.HasPrefix(lines[2], "leader: ") {
		t.Fatalf("members table:\n%s", out.String())
	}
	out = &syncbuf.Buffer{}
	c.Out = out
	if err := c.Members(ctx, "json"); err != nil {
		t.Fatal(err)
	}
	var st struct {
		LeaderID string `json:"leaderId"`
		Members  []struct {
			ID     string `json:"id"`
			Leader bool   `json:"leader"`
			Voter  bool   `json:"voter"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil || len(st.Members) != 1 || !st.Members[0].Leader || st.LeaderID != st.Members[0].ID {
		t.Fatalf("members json %v: %s", err, out.String())
	}
	if err := c.Members(ctx, "xml"); err == nil || !strings.Contains(err.Error(), "table, json or yaml") {
		t.Fatalf("bad format: %v", err)
	}

	run := func(name string) {
		t.Helper()
		if err := s.RunWorkload(ctx, RunSpec{Name: name, Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: " + name}); err != nil {
			t.Fatal(err)
		}
	}
	s.NoWait = true
	run("kept")
	file := filepath.Join(t.TempDir(), "state.snap")
	if err := c.SnapshotSave(ctx, file); err != nil {
		t.Fatal(err)
	}
	run("undone")
	if err := c.SnapshotRestore(ctx, file); err != nil {
		t.Fatal(err)
	}
	s2, _ := e2eSession(t, addr)
	cs, err := s2.CompleteState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	workloads, _ := cs["desiredState"].(map[string]any)["workloads"].(map[string]any)
	if _, ok := workloads["kept"]; !ok {
		t.Fatal("the restored state lacks the workload saved in the snapshot")
	}
	if _, ok := workloads["undone"]; ok {
		t.Fatal("the restore did not undo the later workload")
	}
	if err := c.Remove(ctx, "bad id!"); err == nil || !strings.Contains(err.Error(), "bad id!") {
		t.Fatalf("remove with a bad id: %v", err)
	}
}
