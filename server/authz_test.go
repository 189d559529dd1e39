package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/ratelog"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
)

// addWorkloadRequest is an UpdateState that adds one workload.
func addWorkloadRequest(name string) *ankbase.Request {
	p := func(s string) *string { return &s }
	return &ankbase.Request{RequestId: "r1", RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1", Workloads: &ankbase.WorkloadMap{
			Workloads: map[string]*ankbase.Workload{name: {Agent: p("agent_A"), Runtime: p("podman"), RuntimeConfig: p("image: " + name)}},
		}}},
		UpdateMask: []string{"desiredState.workloads." + name},
	}}}
}

// tlsConn dials addr over mutual TLS with the client files f.
func tlsConn(t *testing.T, addr string, f rpc.TLSFiles) *grpc.ClientConn {
	t.Helper()
	cfg, err := rpc.ClientTLSConfig(f, rpc.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// tlsStream opens an Ankaios stream of kind to addr over mutual TLS with
// the client files f and the outgoing metadata md, and sends first.
func tlsStream(t *testing.T, addr string, f rpc.TLSFiles, kind wire.Kind, first *grpcapi.ToServer, md ...string) rawClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := kind.Open(ctx, tlsConn(t, addr, f))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(first); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return st
}

// tlsAgentStream opens an agent stream and sends the AgentHello for name.
func tlsAgentStream(t *testing.T, addr string, f rpc.TLSFiles, name string, md ...string) rawClient {
	t.Helper()
	return tlsStream(t, addr, f, wire.KindAgent, agentHello(name, rpc.ProtocolVersion), md...)
}

// leaderMoved reports an end caused by a leadership change, not by the
// answer under test.
func leaderMoved(err error) bool {
	return errors.Is(rpc.FromStatus(err), errs.ErrLeaderChanged) || errors.Is(rpc.FromStatus(err), errs.ErrNoLeader)
}

// denied fails unless err is PERMISSION_DENIED, errs.ErrPermissionDenied
// for a Grapnel client, with every one of words in its message.
func denied(t *testing.T, err error, words ...string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !errors.Is(rpc.FromStatus(err), errs.ErrPermissionDenied) {
		t.Fatalf("err = %v, want PERMISSION_DENIED", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("refusal %q does not name %q", err, w)
		}
	}
}

// rolesCluster is three replicas serving mutual TLS with replica
// certificates, and the certificates of one caller per role.
type rolesCluster struct {
	ca        *rpctest.CA // signed all of them, and each replica's own
	rs        *replicaSet
	l, f      *replica
	metrics   *metrics.Set
	agentA    rpc.TLSFiles // grapnel://agent/agent_A
	untypedA  rpc.TLSFiles // an Ankaios-made certificate: DNS agent_A, ank-server, *
	operator  rpc.TLSFiles // grapnel://operator/alice
	commander rpc.TLSFiles // grapnel://commander/ota
	replica   rpc.TLSFiles // grapnel://replica/replicas: a replica certificate of no member
	asReplica rpc.TLSFiles // grapnel://agent/<a replica's id>
}

// startRolesCluster starts the replicas, each server's config adjusted by
// configure when given.
func startRolesCluster(t *testing.T, configure ...func(*Config)) *rolesCluster {
	ca := rpctest.NewCA(t)
	c := &rolesCluster{
		ca:        ca,
		replica:   ca.IssueIdentity(t, "replica", identity.Replica, "replicas", identity.ServerSAN),
		agentA:    ca.IssueIdentity(t, "agent-a", identity.Agent, "agent_A", "agent_A"),
		untypedA:  ca.Issue(t, "ank-agent-a", "agent_A", identity.ServerSAN, "*"),
		operator:  ca.IssueIdentity(t, "alice", identity.Operator, "alice"),
		commander: ca.IssueIdentity(t, "ota", identity.Commander, "ota"),
		metrics:   metrics.NewSet(),
	}
	c.rs = newReplicaSet(t, 3, 0)
	c.rs.ca, c.rs.metrics, c.ca = ca, c.metrics, ca
	if len(configure) > 0 {
		c.rs.configure = configure[0]
	}
	c.asReplica = ca.IssueIdentity(t, "as-replica", identity.Agent, c.rs.reps[0].id, c.rs.reps[0].id)
	for _, r := range c.rs.reps {
		r.start()
	}
	c.l, c.f = c.rs.leader(), c.rs.follower()
	return c
}

// Requirement (issue 17, point 3): every role against every class of
// method, directly at the leader and through a follower, which forwards
// the caller's identity (a replica holds no right of its own but
// Status): allowed calls pass the check (whatever they answer then),
// refused ones get PERMISSION_DENIED naming the identity and the right,
// and change nothing.
func TestRolesOnEveryMethodClass(t *testing.T) {
	c := startRolesCluster(t)
	type call func(t *testing.T, cc *grpc.ClientConn) error
	ctx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	status_ := func(t *testing.T, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewClusterClient(cc).Status(ctx(t), &grapnelpb.StatusRequest{})
		return err
	}
	snapshotSave := func(t *testing.T, cc *grpc.ClientConn) error {
		st, err := grapnelpb.NewClusterClient(cc).SnapshotSave(ctx(t), &grapnelpb.SnapshotSaveRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	snapshotRestore := func(t *testing.T, cc *grpc.ClientConn) error {
		st, err := grapnelpb.NewClusterClient(cc).SnapshotRestore(ctx(t))
		if err != nil {
			return err
		}
		_ = st.Send(&grapnelpb.SnapshotChunk{Data: []byte("not a snapshot")})
		_, err = st.CloseAndRecv()
		return err
	}
	removeReplica := func(t *testing.T, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewClusterClient(cc).RemoveReplica(ctx(t), &grapnelpb.RemoveReplicaRequest{Id: "no-such-replica"})
		return err
	}
	revision := func(t *testing.T, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewPlanClient(cc).Revision(ctx(t), &grapnelpb.RevisionRequest{})
		return err
	}
	forceUnlock := func(t *testing.T, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewLocksClient(cc).Unlock(ctx(t), &grapnelpb.UnlockRequest{Objects: []string{"workload/nginx"}, Force: true})
		return err
	}
	cliUpdate := func(name string) call {
		return func(t *testing.T, cc *grpc.ClientConn) error {
			st, err := wire.KindCLI.Open(ctx(t), cc)
			if err != nil {
				return err
			}
			// A refused stream ends at once: a send may see io.EOF, and
			// the receive gets the status.
			_ = st.Send(commanderHello(rpc.ProtocolVersion))
			_ = st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest(name)}})
			m, err := st.Recv()
			if err != nil {
				return err
			}
			if m.GetResponse().GetUpdateStateSuccess() == nil {
				return errors.New(m.GetResponse().GetError().GetMessage())
			}
			return nil
		}
	}
	const (
		allow = iota
		deny
	)
	cases := []struct {
		name   string
		who    rpc.TLSFiles
		call   call
		want   int
		naming []string
	}{
		{"every role reads the status: agent", c.agentA, status_, allow, nil},
		{"every role reads the status: replica", c.replica, status_, allow, nil},
		{"an agent cannot SnapshotSave (the issue's attack)", c.agentA, snapshotSave, deny,
			[]string{"agent 'agent_A' may not SnapshotSave", "cluster administration needs the operator role"}},
		{"an untyped Ankaios certificate is an agent", c.untypedA, snapshotSave, deny, []string{"agent 'agent_A' (untyped certificate)"}},
		{"an agent cannot SnapshotRestore (the issue's attack)", c.agentA, snapshotRestore, deny, []string{"SnapshotRestore"}},
		{"an agent cannot UpdateState through the CLI connection", c.agentA, cliUpdate("by-agent"), deny, []string{"ConnectCli"}},
		{"an agent cannot read plans", c.agentA, revision, deny, []string{"reading the state"}},
		{"a replica's own certificate holds no client right", c.replica, revision, deny, []string{"replica 'replicas'"}},
		{"a commander updates the desired state", c.commander, cliUpdate("by-commander"), allow, nil},
		{"a commander reads plans", c.commander, revision, allow, nil},
		{"a commander cannot remove a replica", c.commander, removeReplica, deny, []string{"commander 'ota' may not RemoveReplica"}},
		{"a commander cannot SnapshotSave", c.commander, snapshotSave, deny, []string{"commander 'ota'"}},
		{"a commander cannot override a lock", c.commander, forceUnlock, deny, []string{"Unlock(force)"}},
		{"an operator updates the desired state", c.operator, cliUpdate("by-operator"), allow, nil},
		{"an operator may remove replicas", c.operator, removeReplica, allow, nil},
		{"an operator may SnapshotSave", c.operator, snapshotSave, allow, nil},
		{"an operator may SnapshotRestore", c.operator, snapshotRestore, allow, nil},
		{"an operator may override a lock", c.operator, forceUnlock, allow, nil},
	}
	for _, via := range []struct {
		name string
		r    *replica
	}{{"at the leader", c.l}, {"through a follower", c.f}} {
		for _, tc := range cases {
			t.Run(via.name+"/"+tc.name, func(t *testing.T) {
				var rev uint64
				c.l.fsm.Read(func(s *state.Store, _ uint64) { rev = s.Revision })
				err := tc.call(t, tlsConn(t, via.r.addr, tc.who))
				if tc.want == allow {
					if status.Code(err) == codes.PermissionDenied {
						t.Fatalf("refused: %v", err)
					}
					return
				}
				denied(t, err, tc.naming...)
				var after uint64
				c.l.fsm.Read(func(s *state.Store, _ uint64) { after = s.Revision })
				if after != rev {
					t.Fatalf("a refused call changed the state: revision %d → %d", rev, after)
				}
			})
		}
	}
	var out bytes.Buffer
	if _, err := c.metrics.Registry.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if want := `grapnel_permission_denied_total{method="/grapnel.Cluster/SnapshotSave",role="agent"} 4`; !strings.Contains(out.String(), want) {
		t.Fatalf("metrics lack %s:\n%s", want, out.String())
	}
}

// Requirement (issue 17, point 3): an agent says AgentHello only as
// itself, never as another agent, as ank-server or as a replica's id,
// directly or through a follower (which forwards its identity; the
// leader checks the name); a forged forwarded identity is refused.
func TestAgentHelloAsItselfOnly(t *testing.T) {
	c := startRolesCluster(t)
	replicaID := c.rs.reps[0].id
	for _, via := range []struct {
		name string
		pick func() *replica
	}{{"at the leader", c.rs.leader}, {"through a follower", c.rs.follower}} {
		for _, tc := range []struct {
			name   string
			who    rpc.TLSFiles
			agent  string
			ok     bool
			naming []string
		}{
			{"as itself", c.agentA, "agent_A", true, nil},
			{"an untyped certificate as its DNS name", c.untypedA, "agent_A", true, nil},
			{"as another agent", c.agentA, "agent_B", false, []string{"agent 'agent_A'", "may not say AgentHello as 'agent_B'"}},
			{"as ank-server, with a certificate carrying it", c.untypedA, identity.ServerSAN, false, []string{"'ank-server'"}},
			{"as a replica's id", c.asReplica, replicaID, false, []string{"replica's id"}},
			{"an operator as an agent", c.operator, "alice", false, []string{"operator 'alice'"}},
			{"a replica's certificate as an agent", c.replica, "replicas", false, []string{"replica 'replicas'"}},
		} {
			t.Run(via.name+"/"+tc.name, func(t *testing.T) {
				// A leadership change under load ends the stream with
				// "leads no more" before the answer: ask again, as an
				// agent would, at the replicas' new roles.
				for attempt := 1; ; attempt++ {
					st := tlsAgentStream(t, via.pick().addr, tc.who, tc.agent)
					if tc.ok {
						m, err := st.Recv()
						if leaderMoved(err) && attempt < 3 {
							continue
						}
						if err != nil || m.GetServerHello() == nil {
							t.Fatalf("got %v, %v; want the ServerHello", m, err)
						}
						return
					}
					err := streamEnd(t, st, 10*time.Second)
					if leaderMoved(err) && attempt < 3 {
						continue
					}
					denied(t, err, tc.naming...)
					return
				}
			})
		}
	}
	t.Run("a forwarded identity forged by an agent", func(t *testing.T) {
		st := tlsAgentStream(t, c.l.addr, c.agentA, "agent_B", wire.ForwardedByKey, c.f.id, wire.ForwardedIdentityKey, "agent/agent_B")
		denied(t, streamEnd(t, st, 10*time.Second), wire.ForwardedIdentityKey, "only a replica forwards")
	})
}

// Requirement (issue 27, hole 1): holding a replica's key is not enough
// to act as anyone. The audit's attacks, each with a certificate of the
// cluster's CA, called straight at the leader with the forwarding headers
// a proxy sends: a replica never admitted, and a member replica for a
// method no proxy forwards, for a name with no certificate, and for an
// agent stream without the agent's own certificate. Every one is refused
// naming the real certificate; the state is unchanged. The honest proxy
// path (a follower forwarding a client it terminated) still works.
func TestForwardedIdentityIsBelievedOnlyFromAMembersProxy(t *testing.T) {
	c := startRolesCluster(t)
	member := *c.f.tls // a replica of the configuration
	alice, agentA := rpctest.Leaf(t, c.operator), rpctest.Leaf(t, c.agentA)
	certs := func(x *x509.Certificate) string { return base64.StdEncoding.EncodeToString(x.Raw) }
	fwd := func(by, who string, cert *x509.Certificate) []string {
		md := []string{wire.ForwardedByKey, by, wire.ForwardedIdentityKey, who}
		if cert != nil {
			md = append(md, wire.ForwardedCertKey, certs(cert))
		}
		return md
	}
	onLeader := func(f rpc.TLSFiles, md []string, call func(context.Context, *grpc.ClientConn) error) error {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 10*time.Second)
		defer cancel()
		return call(ctx, tlsConn(t, c.l.addr, f))
	}
	save := func(ctx context.Context, cc *grpc.ClientConn) error {
		st, err := grapnelpb.NewClusterClient(cc).SnapshotSave(ctx, &grapnelpb.SnapshotSaveRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	transfer := func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewClusterClient(cc).TransferLeadership(ctx, &grapnelpb.TransferLeadershipRequest{})
		return err
	}
	update := func(name string) func(context.Context, *grpc.ClientConn) error {
		return func(ctx context.Context, cc *grpc.ClientConn) error {
			st, err := wire.KindCLI.Open(ctx, cc)
			if err != nil {
				return err
			}
			// A refused stream ends at once: a Send then fails with
			// io.EOF, and Recv gives the refusal.
			_ = st.Send(commanderHello(rpc.ProtocolVersion))
			_ = st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest(name)}})
			for {
				m, err := st.Recv()
				if err != nil {
					return err
				}
				if r := m.GetResponse(); r != nil {
					if e := r.GetError(); e != nil {
						return errors.New(e.GetMessage())
					}
					return nil
				}
			}
		}
	}
	agentHelloAs := func(ctx context.Context, cc *grpc.ClientConn) error {
		st, err := wire.KindAgent.Open(ctx, cc)
		if err != nil {
			return err
		}
		_ = st.Send(agentHello("agent_A", rpc.ProtocolVersion))
		_, err = st.Recv()
		return err
	}
	for _, tc := range []struct {
		name   string
		with   rpc.TLSFiles
		md     []string
		call   func(context.Context, *grpc.ClientConn) error
		naming []string
	}{
		{"a replica never admitted saves a snapshot as an operator", c.replica, fwd("replicas", "operator/alice", alice), save,
			[]string{"replica 'replicas'", "not in the cluster's configuration"}},
		{"a replica never admitted updates the state as an operator", c.replica, fwd("replicas", "operator/alice", alice), update("by-intruder"),
			[]string{"replica 'replicas'", "not in the cluster's configuration"}},
		{"a replica never admitted connects as an agent", c.replica, fwd("replicas", "agent/agent_A", agentA), agentHelloAs,
			[]string{"replica 'replicas'"}},
		{"a member moves leadership as an operator", member, fwd(c.f.id, "operator/alice", alice), transfer,
			[]string{"replica '" + c.f.id + "'", "TransferLeadership"}},
		{"a member saves a snapshot as an operator", member, fwd(c.f.id, "operator/alice", alice), save,
			[]string{"SnapshotSave"}},
		{"a member names an operator it holds no certificate of", member, fwd(c.f.id, "operator/mallory", nil), update("by-mallory"),
			[]string{"no client certificate"}},
		{"a member names an operator another certificate names", member, fwd(c.f.id, "operator/mallory", alice), update("by-mallory"),
			[]string{"names operator 'alice'"}},
		{"a member connects as an agent without the agent's certificate", member, fwd(c.f.id, "agent/agent_A", nil), agentHelloAs,
			[]string{"no client certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := onLeader(tc.with, tc.md, tc.call)
			denied(t, err, tc.naming...)
		})
	}
	// The member's key with the clients' own certificates, from another
	// address than the member's (127.0.0.2: its proxy dials from its
	// Raft address, 127.0.0.1).
	elsewhere := func(md []string, call func(context.Context, *grpc.ClientConn) error) error {
		cfg, err := rpc.ClientTLSConfig(member, rpc.ServerName)
		if err != nil {
			t.Fatal(err)
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		cc, err := grpc.NewClient(c.l.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 10*time.Second)
		defer cancel()
		return call(ctx, cc)
	}
	denied(t, elsewhere(fwd(c.f.id, "operator/alice", alice), update("by-intruder")), "came from 127.0.0.2")
	denied(t, elsewhere(fwd(c.f.id, "agent/agent_A", agentA), agentHelloAs), "came from 127.0.0.2")
	c.l.fsm.Read(func(s *state.Store, _ uint64) {
		for _, n := range []string{"by-intruder", "by-mallory"} {
			if _, ok := s.Desired.Workloads[n]; ok {
				t.Errorf("workload %s was added", n)
			}
		}
	})
	if id, _, _ := c.l.node.LeaderInfo(); id != c.l.id {
		t.Errorf("leadership moved to %s", id)
	}
	// The honest path: the follower proxies the operator's stream.
	st := tlsStream(t, c.f.addr, c.operator, wire.KindCLI, commanderHello(rpc.ProtocolVersion))
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest("by-alice")}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetResponse().GetUpdateStateSuccess() == nil {
		t.Fatalf("update through the follower: %v %v", m, err)
	}
}

// Requirement (issue 17, point 3): an agent reports only its own
// workloads' states; those of another agent's workloads in its report
// are refused and not applied, its own are.
func TestAgentReportsOnlyItsOwnWorkloads(t *testing.T) {
	c := startRolesCluster(t)
	st := tlsAgentStream(t, c.l.addr, c.agentA, "agent_A")
	if m, err := st.Recv(); err != nil || m.GetServerHello() == nil {
		t.Fatalf("hello: %v %v", m, err)
	}
	own := state.InstanceName{WorkloadName: "mine", AgentName: "agent_A", ID: "1"}
	other := state.InstanceName{WorkloadName: "theirs", AgentName: "agent_B", ID: "2"}
	if err := st.Send(statesMsg(state.WorkloadState{Instance: other, State: state.RunningOk}, state.WorkloadState{Instance: own, State: state.RunningOk})); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		c.l.fsm.Read(func(s *state.Store, _ uint64) { _, ok = s.States.Get(own) })
		return ok
	}, "the agent's own workload state applied")
	c.l.fsm.Read(func(s *state.Store, _ uint64) {
		if _, ok := s.States.Get(other); ok {
			t.Fatal("agent_A's report of agent_B's workload was applied")
		}
	})
	var out bytes.Buffer
	_, _ = c.metrics.Registry.WriteTo(&out)
	if want := `grapnel_permission_denied_total{method="` + authz.ReportStates + `",role="agent"} 1`; !strings.Contains(out.String(), want) {
		t.Fatalf("metrics lack %s", want)
	}
}

// Requirement (issue 17, point 3): the history names a CLI by its
// certificate's identity, through a follower too.
func TestHistoryNamesTheIdentityThroughAFollower(t *testing.T) {
	c := startRolesCluster(t)
	st := tlsStream(t, c.f.addr, c.operator, wire.KindCLI, commanderHello(rpc.ProtocolVersion))
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest("by-operator")}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetResponse().GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v %v", m, err)
	}
	var who string
	c.l.fsm.Read(func(s *state.Store, _ uint64) {
		for _, tx := range s.History.Txs {
			if tx.Touches("by-operator") {
				who = tx.Requester
			}
		}
	})
	if !strings.HasPrefix(who, "operator/alice/cli-conn-") {
		t.Fatalf("requester %q, want operator/alice/cli-conn-…", who)
	}
}

// Requirement (issue 27, hole 8): a lock belongs to a role and a name. A
// commander certificate named alice, which the CA may issue beside
// operator alice's, neither releases operator alice's lock without force
// nor passes it with an update; alice herself does both. The lock lists
// its owner as operator/alice.
func TestLocksGoByRoleAndName(t *testing.T) {
	c := startRolesCluster(t)
	commanderAlice := c.ca.IssueIdentity(t, "commander-alice", identity.Commander, "alice")
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	locks := func(f rpc.TLSFiles) grapnelpb.LocksClient { return grapnelpb.NewLocksClient(tlsConn(t, c.l.addr, f)) }
	got, err := locks(c.operator).Lock(ctx(), &grapnelpb.LockRequest{Objects: []string{"workload/web"}, TtlMs: 600_000, Reason: "maintenance"})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLocks(); len(l) != 1 || l[0].GetOwner() != "operator/alice" {
		t.Fatalf("locks %v, want one owned by operator/alice", l)
	}
	_, err = locks(commanderAlice).Unlock(ctx(), &grapnelpb.UnlockRequest{Objects: []string{"workload/web"}})
	if err == nil || !strings.Contains(err.Error(), "operator/alice") {
		t.Fatalf("commander alice released operator alice's lock: %v", err)
	}
	st := tlsStream(t, c.l.addr, commanderAlice, wire.KindCommand, commanderHello(rpc.ProtocolVersion))
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest("web")}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || !strings.Contains(m.GetResponse().GetError().GetMessage(), "locked by operator/alice") {
		t.Fatalf("commander alice's update of a locked workload: %v, %v", m, err)
	}
	if _, err := locks(c.operator).Unlock(ctx(), &grapnelpb.UnlockRequest{Objects: []string{"workload/web"}}); err != nil {
		t.Fatalf("operator alice releases her own lock: %v", err)
	}
	if l, err := locks(c.operator).List(ctx(), &grapnelpb.ListLocksRequest{}); err != nil || len(l.GetLocks()) != 0 {
		t.Fatalf("locks after the release: %v, %v", l, err)
	}
}

// Requirement (issue 17, point 3): every method a replica's gRPC server
// serves is in the authorization table.
func TestEveryServedMethodIsInTheTable(t *testing.T) {
	ts := startServer(t, nil)
	n := 0
	for svc, info := range ts.g.GetServiceInfo() {
		for _, m := range info.Methods {
			n++
			if _, ok := authz.Methods["/"+svc+"/"+m.Name]; !ok {
				t.Errorf("/%s/%s is served but not in the authorization table", svc, m.Name)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d methods served; the test server registers fewer services than grapnel-server", n)
	}
}

// Requirement (issue 17, point 3): a refusal is logged at most once per
// identity and method per window, with the count of those left out, and
// every one is counted in /metrics.
func TestRefusalsAreRateLimitedAndCounted(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var logged bytes.Buffer
	set := metrics.NewSet()
	s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil)), refusals: ratelog.New(clk, refusalLogWindow), cfg: Config{Metrics: set}}
	agent := identity.Identity{Role: identity.Agent, Name: "agent_A", Names: []string{"agent_A"}, Typed: true}
	op := identity.Identity{Role: identity.Operator, Name: "alice", Names: []string{"alice"}, Typed: true}
	save := grapnelpb.Cluster_SnapshotSave_FullMethodName
	for range 5 {
		s.refused(agent, save, authz.Check(agent, save))
	}
	s.refused(op, authz.UpdateState, errors.New("another identity is another line"))
	clk.Advance(refusalLogWindow)
	s.refused(agent, save, authz.Check(agent, save))
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "agent 'agent_A' may not SnapshotSave") || !strings.Contains(lines[2], "suppressed=4") {
		t.Fatalf("log lines:\n%s", logged.String())
	}
	var out bytes.Buffer
	_, _ = set.Registry.WriteTo(&out)
	if want := `grapnel_permission_denied_total{method="` + save + `",role="agent"} 6`; !strings.Contains(out.String(), want) {
		t.Fatalf("metrics lack %s:\n%s", want, out.String())
	}
}
