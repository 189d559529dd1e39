package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
	"github.com/hashicorp/raft"
)

// cliAs opens a CLI stream to addr that declares owner, as `grapnel
// --owner` does (no owner: an unmodified Ankaios client).
func cliAs(t *testing.T, addr, owner string) *testConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if owner != "" {
		ctx = wire.WithOwner(ctx, owner)
	}
	c := &testConn{t: t, cc: cc, cancel: cancel}
	c.cond = sync.NewCond(&c.mu)
	if c.stream, err = wire.KindCLI.Open(ctx, cc); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := c.stream.Recv()
			c.mu.Lock()
			if err != nil {
				c.err = err
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			c.msgs = append(c.msgs, m)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.close)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}})
	return c
}

// as is a context declaring owner on an outgoing call.
func as(t *testing.T, owner string) context.Context { return wire.WithOwner(callCtx(t), owner) }

func webImage(t *testing.T, image string) (state.Tree, string) {
	return manifestState(t, "web", image),
		"desiredState.workloads.web"
}

func updateText(r *ankbase.Response) string {
	if e := r.GetError(); e != nil {
		return e.GetMessage()
	}
	return ""
}

// reason is the ErrorInfo reason of a status error.
func reason(err error) string {
	return rpc.FromStatus(err).Error() + " / " + func() string {
		switch {
		case errors.Is(rpc.FromStatus(err), errs.ErrLocked):
			return "LOCKED"
		case errors.Is(rpc.FromStatus(err), errs.ErrRevisionConflict):
			return "REVISION_CONFLICT"
		}
		return "?"
	}()
}

// Requirement (issue 16, point 4): Plan.Apply at an expected revision is
// refused with FAILED_PRECONDITION naming both revisions when what it
// addresses changed since; a change outside its mask does not conflict;
// a deletion is a change. An update without one is unaffected.
func TestExpectedRevision(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb))
	ts.agent("agent_A", nil)
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)
	rev := func() uint64 {
		r, err := pc.Revision(ctx, &grapnelpb.RevisionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetRevision()
	}
	read := rev()
	// Another client changes cache (outside web's mask), then web.
	cli := ts.cli()
	if r := cli.update(manifestState(t, "cache", "redis"), "desiredState.workloads.cache"); updateText(r) != "" {
		t.Fatalf("cache: %s", updateText(r))
	}
	at := func(rev uint64, req *ankbase.UpdateStateRequest) error {
		_, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: req, ExpectedRevision: &rev})
		return err
	}
	if err := at(read, oneWorkload(t, "web", "nginx:2")); err != nil {
		t.Fatalf("a change outside the mask conflicted: %v", err)
	}
	// web changed at read+2: an update of web at read is refused.
	err := at(read, oneWorkload(t, "web", "nginx:3"))
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(rpc.FromStatus(err), errs.ErrRevisionConflict) ||
		!strings.Contains(err.Error(), "expected revision "+itoa(read)+", the desired state is at revision "+itoa(read+2)+": workload/web changed at revision "+itoa(read+2)) {
		t.Fatalf("stale web update: %v (%s)", err, reason(err))
	}
	// Deleting cache at read+2 is fine; then an update of cache at read+2 conflicts.
	del := &ankbase.UpdateStateRequest{NewState: &ankbase.CompleteState{}, UpdateMask: []string{"desiredState.workloads.cache"}}
	if err := at(read+2, del); err != nil {
		t.Fatalf("delete at the current revision: %v", err)
	}
	if err := at(read+2, oneWorkload(t, "cache", "redis:2")); !errors.Is(rpc.FromStatus(err), errs.ErrRevisionConflict) ||
		!strings.Contains(err.Error(), "workload/cache was deleted at revision "+itoa(read+3)) {
		t.Fatalf("update after a deletion: %v", err)
	}
	// Without masks the whole desired state counts.
	whole := oneWorkload(t, "web", "nginx:4")
	whole.UpdateMask = nil
	if err := at(read+2, whole); !errors.Is(rpc.FromStatus(err), errs.ErrRevisionConflict) {
		t.Fatalf("an unmasked update at an old revision: %v", err)
	}
	if got := rev(); got != read+3 {
		t.Fatalf("revision %d, want %d", got, read+3)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func manifestState(t *testing.T, name, image string) state.Tree {
	return manifest(t, "apiVersion: v1\nworkloads:\n  "+name+":\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: "+image+"\"\n")
}

// Requirement (issue 16, point 5): while alice holds a lock on web, an
// update of web from anyone else is refused on every path (an Ankaios
// stream without an owner, the control interface through an agent,
// bob's stream, bob's Plan.Apply, a dry-run)
// with "locked by alice until TIME (reason)"; alice's own update goes
// through; another workload is not locked; after the TTL by the
// leader's (fake) clock, bob's update goes through, with no write at
// expiry.
func TestLocksRefuseOthersUntilExpiry(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	// ctl, on agent_A, may write web through its control interface.
	withCtl := dbWeb + `  ctl:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: ctl"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Write
          filterMasks: ["desiredState.workloads.web"]
`
	ts := startServerCfg(t, t.TempDir(), mustState(t, withCtl), func(c *Config) { c.Clock = fake })
	agent := ts.agent("agent_A", nil)
	lc := grapnelpb.NewLocksClient(dialRaw(t, ts.addr))
	pc := planClient(t, ts.addr)
	if _, err := lc.Lock(callCtx(t), &grapnelpb.LockRequest{Objects: []string{"workload/web"}, TtlMs: 60_000}); err == nil ||
		!strings.Contains(err.Error(), "owner") || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a lock without an owner: %v", err)
	}
	got, err := lc.Lock(as(t, "alice"), &grapnelpb.LockRequest{Objects: []string{"workload/web"}, TtlMs: 60_000, Reason: "upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLocks(); len(l) != 1 || l[0].GetOwner() != "alice" || l[0].GetExpiresMs() != fake.Now().UnixMilli()+60_000 {
		t.Fatalf("lock %v", l)
	}
	want := "workload/web is locked by alice until 2023-11-14T22:14:20Z (upgrade)"
	// A refusal is answered once the history holds it: each comes after
	// a quiet spell, so that the leader writes it at once rather than at
	// the end of a flush window (rejections.go). 30 s of the 60 s TTL.
	quiet := func() { fake.Advance(rejectionFlushDelay) }

	tree, mask := webImage(t, "nginx:2")
	if r := cliAs(t, ts.addr, "").update(tree, mask); !strings.Contains(updateText(r), want) {
		t.Fatalf("an Ankaios client's update: %q", updateText(r))
	}
	// A workload's update through the control interface: its agent's
	// stream, which holds no lock.
	quiet()
	if r := forward(agent, "ctl@1", updateRequest(t, tree, mask)); !strings.Contains(updateText(r), want) {
		t.Fatalf("a control-interface update: %q", updateText(r))
	}
	bob := cliAs(t, ts.addr, "bob")
	quiet()
	if r := bob.update(tree, mask); !strings.Contains(updateText(r), want) {
		t.Fatalf("bob's update: %q", updateText(r))
	}
	quiet()
	_, err = pc.Apply(as(t, "bob"), &grapnelpb.ApplyRequest{Update: oneWorkload(t, "web", "nginx:2"), ExpectedSeq: 1})
	if status.Code(err) != codes.FailedPrecondition || !errors.Is(rpc.FromStatus(err), errs.ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("bob's Plan.Apply: %v", err)
	}
	plan, err := pc.DryRun(as(t, "bob"), &grapnelpb.PlanRequest{Update: oneWorkload(t, "web", "nginx:2")})
	if err != nil || plan.GetAccepted() || len(plan.GetRejections()) != 1 || !strings.Contains(plan.GetRejections()[0].GetMessage(), want) {
		t.Fatalf("bob's dry-run: %v %v", plan.GetRejections(), err)
	}
	if r := bob.update(manifestState(t, "cache", "redis"), "desiredState.workloads.cache"); updateText(r) != "" {
		t.Fatalf("bob's update of an unlocked workload: %q", updateText(r))
	}
	if r := cliAs(t, ts.addr, "alice").update(tree, mask); updateText(r) != "" {
		t.Fatalf("alice's own update: %q", updateText(r))
	}
	// Bob cannot release alice's lock without force.
	if _, err := lc.Unlock(as(t, "bob"), &grapnelpb.UnlockRequest{Objects: []string{"workload/web"}}); !errors.Is(rpc.FromStatus(err), errs.ErrLocked) {
		t.Fatalf("bob unlocking: %v", err)
	}
	// Expiry writes nothing.
	_, index0 := fsmIndex(ts)
	fake.Advance(31 * time.Second)
	if _, index := fsmIndex(ts); index != index0 {
		t.Fatalf("index %d after expiry, %d before", index, index0)
	}
	tree3, _ := webImage(t, "nginx:3")
	if r := bob.update(tree3, mask); updateText(r) != "" {
		t.Fatalf("bob's update after the TTL: %q", updateText(r))
	}
	if l, err := lc.List(callCtx(t), &grapnelpb.ListLocksRequest{}); err != nil || len(l.GetLocks()) != 0 {
		t.Fatalf("locks after the TTL: %v %v", l, err)
	}
}

// Requirement (issue 16, point 5; issue 17, point 3; issue 27, hole 8):
// with a client certificate the owner is its identity's role and name,
// whatever the client declares; without one, the declared name; a
// forwarded identity the guard does not believe owns nothing (the
// believed one: TestLocksGoByRoleAndName).
func TestLockOwner(t *testing.T) {
	withCert := func(ctx context.Context, uri string, names ...string) context.Context {
		c := &x509.Certificate{DNSNames: names}
		if uri != "" {
			u, err := url.Parse(uri)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = []*url.URL{u}
		}
		st := tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
		return peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
	}
	incoming := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	// At cluster version 1 owners are role/name keys; before, the
	// previous release's bare names, which a leader of either release
	// compares alike.
	keyed := fsm.New()
	entry, err := fsm.ClusterVersionEntry(state.ClusterVersionRevocation)
	if err != nil {
		t.Fatal(err)
	}
	if err, ok := keyed.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry}).(error); ok {
		t.Fatal(err)
	}
	legacy := &Server{guard: &authz.Guard{Untyped: identity.Commander}, fsm: fsm.New()}
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{withCert(incoming(wire.OwnerKey, "mallory"), "grapnel://operator/operator-1", "x"), "operator-1"},
		{withCert(incoming(wire.OwnerKey, "mallory"), "", "ota", "y"), "ota"},
		{incoming(wire.OwnerKey, "alice@laptop"), "alice@laptop"},
	} {
		if got := legacy.lockOwner(tc.ctx); got != tc.want {
			t.Errorf("at cluster version 0: owner %q, want %q", got, tc.want)
		}
	}
	s := &Server{guard: &authz.Guard{Untyped: identity.Commander}, fsm: keyed}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"declared, no TLS", incoming(wire.OwnerKey, "alice@laptop"), "alice@laptop"},
		{"none", context.Background(), ""},
		{"certificate wins over a declared name", withCert(incoming(wire.OwnerKey, "mallory"), "grapnel://operator/operator-1", "x"), "operator/operator-1"},
		{"untyped certificate: its first DNS name", withCert(incoming(wire.OwnerKey, "mallory"), "", "ota", "y"), "commander/ota"},
		{"a forwarded identity not believed", withCert(incoming(wire.ForwardedIdentityKey, "operator/operator-2", wire.OwnerKey, "mallory"), "grapnel://replica/r2", rpc.ServerName), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.lockOwner(tc.ctx); got != tc.want {
				t.Fatalf("owner %q, want %q", got, tc.want)
			}
		})
	}
}

// Requirement (issue 16, point 5): the lock check is a pure function of
// the plan, the locks, the owner and the time: a config change that
// renders a locked workload again touches it; an unrelated lock does not
// refuse; the owner passes; an expired lock is ignored.
func TestCheckLocksTouched(t *testing.T) {
	const base = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: 'image: {{c.img}}'\n    configs: {c: web_cfg}\nconfigs:\n  web_cfg: {img: nginx}\n  other: x\n"
	st := storeOf(t, base, "agent_A")
	next := mustState(t, strings.Replace(base, "img: nginx", "img: nginx2", 1))
	p, err := plan.Make(render.New(), state.Limits{}, plan.Admission{}, st, *next, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock := state.Lock{Owner: "alice", ExpiresMs: 1000}
	for _, tc := range []struct {
		name  string
		locks state.Locks
		owner string
		now   int64
		want  string
	}{
		{"the re-rendered workload", state.Locks{"workload/web": lock}, "bob", 0, "workload/web is locked by alice"},
		{"the changed config", state.Locks{"config/web_cfg": lock}, "bob", 0, "config/web_cfg is locked by alice"},
		{"an untouched config", state.Locks{"config/other": lock}, "bob", 0, ""},
		{"the owner", state.Locks{"workload/web": lock}, "alice", 0, ""},
		{"expired", state.Locks{"workload/web": lock}, "bob", 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := plan.CheckLocks(tc.locks, p, plan.Guard{Owner: tc.owner, NowMs: tc.now})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errs.ErrLocked)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
