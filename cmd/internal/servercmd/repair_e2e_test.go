package servercmd

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// Issue 29 point 3, replaced flash on a majority: two of three units come
// back with new, empty flash under their old names. They do not bootstrap
// a new cluster, and they hold their votes (they cannot know what they
// had acknowledged), so no leader is elected and `cluster members` shows
// why. `grapnel cluster repair` on one of them, sent through the intact
// replica, releases its hold: the intact replica leads, both catch up,
// and the state it kept is everyone's.
func TestFlashReplacedOnAMajority_OperatorRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel-server and grapnel and runs three replicas")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	dir := t.TempDir()
	g := e2eGrapnel(t, bench.GrapnelConfig{
		Bin: bins["grapnel-server"], Dir: dir, Replicas: 3, Extra: []string{"--log-level", "info"},
	}, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := g.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	cli := bins["grapnel"]
	kept := map[string]string{"web": "nginx", "db": "postgres"}
	e2eCLI(t, cli, g.Addrs(), "apply", e2eManifest(t, dir, "kept.yaml", kept))

	for i := range g.Replicas {
		g.Kill(i)
	}
	for _, i := range []int{1, 2} {
		if err := os.RemoveAll(g.Replicas[i].DataDir); err != nil {
			t.Fatal(err)
		}
	}
	for i := range g.Replicas {
		if err := g.Start(i); err != nil {
			t.Fatal(err)
		}
	}
	intact := []string{g.Replicas[0].Addr}
	held := func(i int) func() bool {
		return func() bool {
			st, err := g.Status(ctx, 0)
			if err != nil {
				return false
			}
			for _, m := range st.GetMembers() {
				if m.GetId() == g.Replicas[i].Name {
					return strings.Contains(m.GetVoteHold(), "no Raft state")
				}
			}
			return false
		}
	}
	testwait.For(t, 30*time.Second, held(1), "%s announces its vote hold", g.Replicas[1].Name)
	testwait.For(t, 30*time.Second, held(2), "%s announces its vote hold", g.Replicas[2].Name)
	// No leader while both hold: the intact replica needs one vote.
	for i := range g.Replicas {
		st, err := g.Status(ctx, i)
		if err == nil && st.GetLeaderId() != "" {
			t.Fatalf("%s sees leader %s while the empty replicas hold their votes", g.Replicas[i].Name, st.GetLeaderId())
		}
	}

	out := e2eCLI(t, cli, intact, "cluster", "repair", g.Replicas[1].Name)
	if !strings.Contains(out, "released the vote hold of "+g.Replicas[1].Name) {
		t.Fatalf("cluster repair printed %q", out)
	}
	leader, err := g.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if leader != 0 {
		t.Fatalf("leader %s; only %s kept the state", g.Replicas[leader].Name, g.Replicas[0].Name)
	}
	e2eExpect(t, "after the repair", e2eWorkloads(t, cli, g.Addrs()), kept)
	testwait.For(t, 30*time.Second, func() bool {
		st, err := g.Status(ctx, 2)
		if err != nil {
			return false
		}
		for _, m := range st.GetMembers() {
			if m.GetVoteHold() != "" {
				return false
			}
		}
		return st.GetLeaderId() == g.Replicas[0].Name
	}, "every replica votes again")
	// A repair of a replica that holds nothing is refused, naming why.
	msg, err := exec.Command(cli, "-k", "--no-wait", "--server-url", g.Replicas[0].Addr, "cluster", "repair", g.Replicas[2].Name).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "holds no vote") {
		t.Fatalf("repair of a replica that votes: %v\n%s", err, msg)
	}
}
