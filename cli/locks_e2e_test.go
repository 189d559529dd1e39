package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// ownerSession is e2eSession for a client declaring owner, with the
// Plan and Locks services.
func ownerSession(t *testing.T, addr, owner string) (*Session, *syncbuf.Buffer) {
	t.Helper()
	e2eSession(t, addr) // waits for the leader
	c, err := client.Dial(context.Background(), client.Options{Addrs: []string{addr}, Insecure: true, ResponseTimeout: 3 * time.Second, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _, _ := session(c)
	out := &syncbuf.Buffer{}
	s.Out, s.Timeout, s.NoWait = out, 3*time.Second, true
	s.Plan, s.Locks = c.Plan(), c.Locks()
	return s, out
}

// Requirement (issue 16, points 4 and 5): lock, get locks, unlock and
// --expect-revision against a real server: bob's run of alice's locked
// workload is refused with the lock's owner, time and reason, alice's
// goes through, bob cannot release alice's lock, and an update at a
// revision older than a change of the same workload is refused.
func TestLocksEndToEnd(t *testing.T) {
	addr := startServer(t)
	alice, aliceOut := ownerSession(t, addr, "alice")
	bob, bobOut := ownerSession(t, addr, "bob")
	ctx := context.Background()
	startAgentConnected(t, alice, addr, "agent_A")
	web := func(image string) RunSpec {
		return RunSpec{Name: "web", Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: " + image}
	}

	if err := alice.Lock(ctx, []string{"web", "config/site"}, 10*time.Minute, "upgrade"); err != nil {
		t.Fatal(err)
	}
	if got := aliceOut.String(); !strings.Contains(got, "locked workload/web by alice until") || !strings.Contains(got, "locked config/site by alice") {
		t.Fatalf("lock printed %q", got)
	}
	aliceOut.Reset()
	if err := alice.GetLocks(ctx, PlanTable); err != nil {
		t.Fatal(err)
	}
	if got := aliceOut.String(); !strings.Contains(got, "OBJECT") || !strings.Contains(got, "workload/web") || !strings.Contains(got, "upgrade") {
		t.Fatalf("get locks printed %q", got)
	}

	err := bob.RunWorkload(ctx, web("nginx"))
	if err == nil || !strings.Contains(err.Error(), "workload/web is locked by alice until ") || !strings.Contains(err.Error(), "(upgrade)") {
		t.Fatalf("bob's run of a locked workload: %v", err)
	}
	if err := bob.Unlock(ctx, []string{"web"}, false); err == nil || !strings.Contains(err.Error(), "bob may release it only with force") {
		t.Fatalf("bob unlocking alice's lock: %v", err)
	}

	// bob reads the revision, alice changes web, bob's update at the
	// revision he read is refused.
	if err := bob.GetState(ctx, nil, FormatYAML); err != nil {
		t.Fatal(err)
	}
	var rev uint64
	first, _, _ := strings.Cut(bobOut.String(), "\n")
	if _, err := fmtSscan(first, &rev); err != nil {
		t.Fatalf("get state's first line %q: %v", first, err)
	}
	if err := alice.RunWorkload(ctx, web("nginx")); err != nil {
		t.Fatalf("alice's own update: %v", err)
	}
	if err := alice.Unlock(ctx, []string{"web", "config/site"}, false); err != nil {
		t.Fatal(err)
	}
	bob.ExpectRevision = &rev
	if err := bob.RunWorkload(ctx, web("nginx:2")); err == nil || !strings.Contains(err.Error(), "revision conflict") || !strings.Contains(err.Error(), "workload/web changed") {
		t.Fatalf("bob's update at revision %d: %v", rev, err)
	}
	bob.ExpectRevision = nil
	if err := bob.RunWorkload(ctx, web("nginx:2")); err != nil {
		t.Fatalf("bob's update once unlocked: %v", err)
	}
	bobOut.Reset()
	if err := bob.GetLocks(ctx, PlanJSON); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(bobOut.String()), ""); got != `{"locks":[]}` {
		t.Fatalf("locks after unlocking: %q", got)
	}
}

func fmtSscan(line string, rev *uint64) (int, error) { return fmt.Sscanf(line, "# revision: %d", rev) }
