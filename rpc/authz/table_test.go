package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Requirement (issue 17, point 3): every method of every service a
// replica serves, and every kind of Ankaios request, is in the table, so
// a new one cannot be forgotten. The services are read from the proto
// files themselves: a service added to grapnel.proto is covered too.
func TestTableCoversEveryMethod(t *testing.T) {
	for _, f := range []protoreflect.FileDescriptor{grapnelpb.File_grapnel_proto, grpcapi.File_grpc_api_proto} {
		for i := 0; i < f.Services().Len(); i++ {
			s := f.Services().Get(i)
			for j := 0; j < s.Methods().Len(); j++ {
				m := "/" + string(s.FullName()) + "/" + string(s.Methods().Get(j).Name())
				if _, ok := Methods[m]; !ok {
					t.Errorf("%s is not in the authorization table (rpc/authz/table.go)", m)
				}
			}
		}
	}
	kinds := requestContent.Fields()
	for i := 0; i < kinds.Len(); i++ {
		m := "/ank_base.Request/" + string(kinds.Get(i).Name())
		if _, ok := Methods[m]; !ok {
			t.Errorf("request kind %s is not in the authorization table", m)
		}
	}
	for m, r := range Methods {
		if len(Holders[r]) == 0 {
			t.Errorf("%s needs %v, which no role holds", m, r)
		}
	}
}

// Requirement (issue 17, point 3): the rights of each role.
func TestCheck(t *testing.T) {
	id := func(r identity.Role, name string) identity.Identity {
		return identity.Identity{Role: r, Name: name, Names: []string{name}, Typed: true}
	}
	agent, op, cmd, rep := id(identity.Agent, "agent_A"), id(identity.Operator, "alice"), id(identity.Commander, "ota"), id(identity.Replica, "r1")
	untyped := identity.Identity{Role: identity.Agent, Name: "agent_B", Names: []string{"agent_B"}}
	for _, tc := range []struct {
		name   string
		id     identity.Identity
		method string
		denied string // the refusal's text, "" when allowed
	}{
		{"insecure mode allows everything", identity.Insecure, grapnelpb.Cluster_SnapshotRestore_FullMethodName, ""},
		{"an agent reads the status", agent, grapnelpb.Cluster_Status_FullMethodName, ""},
		{"an agent watches the cluster", agent, grapnelpb.Cluster_Watch_FullMethodName, ""},
		{"an agent connects as an agent", agent, grpcapi.AgentConnection_ConnectAgent_FullMethodName, ""},
		{"an agent may not SnapshotSave", agent, grapnelpb.Cluster_SnapshotSave_FullMethodName,
			"permission denied: agent 'agent_A' may not SnapshotSave: cluster administration needs the operator role"},
		{"an untyped agent may not SnapshotRestore", untyped, grapnelpb.Cluster_SnapshotRestore_FullMethodName,
			"agent 'agent_B' (untyped certificate) may not SnapshotRestore"},
		{"an agent may not open a CLI connection", agent, grpcapi.CliConnection_ConnectCli_FullMethodName, "reading the state needs the operator or commander role"},
		{"an agent may not update the state", agent, UpdateState, "may not updateStateRequest: changing the desired state"},
		{"a commander updates the state", cmd, UpdateState, ""},
		{"a commander applies plans", cmd, grapnelpb.Plan_Apply_FullMethodName, ""},
		{"a commander takes locks", cmd, grapnelpb.Locks_Lock_FullMethodName, ""},
		{"a commander may not override locks", cmd, UnlockForce, "commander 'ota' may not Unlock(force)"},
		{"a commander may not remove replicas", cmd, grapnelpb.Cluster_RemoveReplica_FullMethodName, "may not RemoveReplica"},
		{"a commander may not transfer leadership", cmd, grapnelpb.Cluster_TransferLeadership_FullMethodName, "TransferLeadership"},
		{"a commander may not set agent modes", cmd, grapnelpb.Cluster_SetAgentMode_FullMethodName, "SetAgentMode"},
		{"a commander may not resync agents", cmd, grapnelpb.Cluster_ResyncAgent_FullMethodName, "ResyncAgent"},
		{"a commander may not connect as an agent", cmd, grpcapi.AgentConnection_ConnectAgent_FullMethodName, "the agent connection needs the agent role"},
		{"an operator administers", op, grapnelpb.Cluster_SnapshotRestore_FullMethodName, ""},
		{"an operator overrides locks", op, UnlockForce, ""},
		{"an operator reads the history", op, grapnelpb.History_List_FullMethodName, ""},
		{"a replica reads the status", rep, grapnelpb.Cluster_Watch_FullMethodName, ""},
		{"a replica of its own may not update", rep, grapnelpb.Plan_Apply_FullMethodName, "replica 'r1' may not Apply"},
		{"an unknown method is refused", op, "/grapnel.Cluster/Format", "not in the authorization table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.id, tc.method)
			if tc.denied == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, errs.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.denied) {
				t.Fatalf("err = %v, want a refusal with %q", err, tc.denied)
			}
			if status.Code(rpc.ToStatus(err)) != codes.PermissionDenied {
				t.Fatalf("%v does not map to PERMISSION_DENIED", err)
			}
		})
	}
}

func TestRequestKind(t *testing.T) {
	r := &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}
	if got := RequestKind(r); got != CompleteState {
		t.Fatalf("RequestKind = %q, want %q", got, CompleteState)
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, id := range []identity.Identity{
		{Role: identity.Operator, Name: "alice", Names: []string{"alice"}, Typed: true},
		{Role: identity.Agent, Name: "a", Names: []string{"a", "b"}},
	} {
		got, err := Decode(Encode(id))
		if err != nil || got.Role != id.Role || got.Name != id.Name || got.Typed != id.Typed || strings.Join(got.Names, ",") != strings.Join(id.Names, ",") {
			t.Fatalf("Decode(Encode(%+v)) = %+v, %v", id, got, err)
		}
	}
	if Encode(identity.Insecure) != "" {
		t.Fatal("the insecure mode forwards no identity")
	}
	for _, bad := range []string{"", "agent", "root/x", "agent/", "agent/*", "agent/ank-server", "agent/a,,b", "agent/a b", "operator/x.y"} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

// Requirement (issue 17, point 3): a call acts as the peer's certificate
// says; a forwarded identity from anyone but a replica is refused.
func TestIdentify(t *testing.T) {
	withPeer := func(uri string, dns []string, md ...string) context.Context {
		ctx := context.Background()
		if uri != "" || dns != nil {
			cert := &x509.Certificate{DNSNames: dns}
			if uri != "" {
				u, _ := url.Parse(uri)
				cert.URIs = []*url.URL{u}
			}
			ctx = peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
				VerifiedChains: [][]*x509.Certificate{{cert}},
			}}})
		}
		if len(md) > 0 {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(md...))
		}
		return ctx
	}
	fwd := func(id string) []string { return []string{wire.ForwardedByKey, "r2", wire.ForwardedIdentityKey, id} }
	g := &Guard{Untyped: identity.Agent}
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		want    string // Who of the identity
		wantErr error
	}{
		{"a typed certificate", withPeer("grapnel://operator/alice", nil), "operator 'alice'", nil},
		{"an untyped certificate gets the configured role", withPeer("", []string{"agent_A"}), "agent 'agent_A' (untyped certificate)", nil},
		{"no TLS", withPeer("", nil), "an unauthenticated peer", nil},
		{"no TLS ignores a forwarded identity", withPeer("", nil, fwd("operator/alice")...), "an unauthenticated peer", nil},
		{"forged by an agent", withPeer("grapnel://agent/agent_A", nil, fwd("operator/alice")...), "", errs.ErrPermissionDenied},
		{"forged by an untyped certificate with ank-server", withPeer("", []string{identity.ServerSAN, "x"}, fwd("operator/alice")...), "", errs.ErrPermissionDenied},
		{"a guard that knows no members believes no replica", withPeer("grapnel://replica/r2", nil, fwd("commander/ota")...), "", errs.ErrPermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := g.identify(tc.ctx, grapnelpb.Plan_Apply_FullMethodName)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && Who(id) != tc.want {
				t.Fatalf("identity %s, want %s", Who(id), tc.want)
			}
		})
	}
	refuse := &Guard{Untyped: identity.None}
	if _, err := refuse.Identify(withPeer("", []string{"agent_A"})); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("untyped certificates refused: err = %v", err)
	}
}

// Requirement (issue 27, hole 1): a forwarded identity is believed only
// from a replica of the configuration whose certificate is not revoked,
// that names itself as the forwarder, for a method a proxy forwards, and
// only with the client's own certificate, verified against the CA and
// naming exactly that identity. Each refusal names the real certificate.
func TestForwardedIdentity(t *testing.T) {
	ca, other := rpctest.NewCA(t), rpctest.NewCA(t)
	leaf := func(f rpc.TLSFiles) *x509.Certificate { return rpctest.Leaf(t, f) }
	r2 := leaf(ca.IssueIdentity(t, "r2", identity.Replica, "r2", identity.ServerSAN))
	r9 := leaf(ca.IssueIdentity(t, "r9", identity.Replica, "r9", identity.ServerSAN))
	removed := leaf(ca.IssueIdentity(t, "r3", identity.Replica, "r3", identity.ServerSAN))
	removedSelf := leaf(ca.IssueIdentity(t, "r3-new", identity.Replica, "r3", identity.ServerSAN)) // r3's certificate now
	r4 := leaf(ca.IssueIdentity(t, "r4", identity.Replica, "r4", identity.ServerSAN))
	ota := leaf(ca.IssueIdentity(t, "ota", identity.Commander, "ota"))
	alice := leaf(ca.IssueIdentity(t, "alice", identity.Operator, "alice"))
	agentA := leaf(ca.IssueIdentity(t, "agent_A", identity.Agent, "agent_A", "agent_A"))
	untypedA := leaf(ca.Issue(t, "ank-agent", "agent_A"))
	foreignOta := leaf(other.IssueIdentity(t, "ota", identity.Commander, "ota"))
	revokedOta := leaf(ca.IssueIdentity(t, "ota-old", identity.Commander, "ota"))
	g := &Guard{
		Untyped: identity.Agent,
		Self:    "r3",
		Member: func(id string) (MemberInfo, bool) {
			switch id {
			case "r2":
				return MemberInfo{Host: "10.0.0.2"}, true
			case "r3":
				return MemberInfo{Host: "10.0.0.3"}, true
			case "r4": // a replica of the previous release, before the upgrade is finalized
				return MemberInfo{Host: "10.0.0.4", Legacy: true}, true
			}
			return MemberInfo{}, false
		},
		Revoked: func(serial string) string {
			if serial == identity.Serial(removed) || serial == identity.Serial(revokedOta) {
				return "removed"
			}
			return ""
		},
		Roots: ca.Pool,
	}
	b64 := func(cs ...*x509.Certificate) string {
		var parts []string
		for _, c := range cs {
			parts = append(parts, base64.StdEncoding.EncodeToString(c.Raw))
		}
		return strings.Join(parts, ",")
	}
	callFrom := func(from string, by *x509.Certificate, md ...string) context.Context {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(from)),
			AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{by}}}}})
		return metadata.NewIncomingContext(ctx, metadata.Pairs(md...))
	}
	// A proxy's call comes from its replica's Raft address.
	call := func(by *x509.Certificate, md ...string) context.Context { return callFrom("10.0.0.2:41000", by, md...) }
	proxied := func(byName, claim string, certs ...*x509.Certificate) []string {
		md := []string{wire.ForwardedByKey, byName, wire.ForwardedIdentityKey, claim}
		if len(certs) > 0 {
			md = append(md, wire.ForwardedCertKey, b64(certs...))
		}
		return md
	}
	apply, agentStream := grapnelpb.Plan_Apply_FullMethodName, grpcapi.AgentConnection_ConnectAgent_FullMethodName
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		method  string
		want    string   // Who of the identity
		wantErr error    // or the refusal
		naming  []string // words of the refusal
	}{
		{"a member forwards a commander with its certificate", call(r2, proxied("r2", "commander/ota", ota)...), apply,
			"commander 'ota' via replica 'r2' (serial " + identity.Serial(r2) + ")", nil, nil},
		{"an agent stream with the agent's own certificate", call(r2, proxied("r2", "agent/agent_A", agentA)...), agentStream,
			"agent 'agent_A' via replica 'r2' (serial " + identity.Serial(r2) + ")", nil, nil},
		{"an untyped agent certificate", call(r2, proxied("r2", "agent/agent_A;untyped", untypedA)...), agentStream,
			"agent 'agent_A' (untyped certificate) via replica 'r2' (serial " + identity.Serial(r2) + ")", nil, nil},
		{"a replica never admitted", call(r9, proxied("r9", "operator/alice", alice)...), apply,
			"", errs.ErrPermissionDenied, []string{"replica 'r9'", "not in the cluster's configuration"}},
		{"a removed replica's revoked certificate", call(removed, proxied("r3", "operator/alice", alice)...), apply,
			"", errs.ErrUnauthenticated, []string{"replica 'r3'", "revoked"}},
		{"a method no proxy forwards", call(r2, proxied("r2", "operator/alice", alice)...), grapnelpb.Cluster_SnapshotSave_FullMethodName,
			"", errs.ErrPermissionDenied, []string{"replica 'r2'", "SnapshotSave"}},
		{"the forwarder names another replica", call(r2, proxied("r3", "operator/alice", alice)...), apply,
			"", errs.ErrPermissionDenied, []string{"forwarded by \"r3\""}},
		{"a name with no certificate", call(r2, proxied("r2", "operator/mallory")...), apply,
			"", errs.ErrPermissionDenied, []string{"no client certificate"}},
		{"a name the certificate does not carry", call(r2, proxied("r2", "operator/mallory", alice)...), apply,
			"", errs.ErrPermissionDenied, []string{"names operator 'alice'"}},
		{"an agent stream with another agent's identity", call(r2, proxied("r2", "agent/agent_B", agentA)...), agentStream,
			"", errs.ErrPermissionDenied, []string{"names agent 'agent_A'"}},
		{"a certificate of another CA", call(r2, proxied("r2", "commander/ota", foreignOta)...), apply,
			"", errs.ErrPermissionDenied, []string{"does not verify"}},
		{"a revoked client certificate", call(r2, proxied("r2", "commander/ota", revokedOta)...), apply,
			"", errs.ErrUnauthenticated, []string{"revoked"}},
		{"a member's key from another address", callFrom("10.9.9.9:5000", r2, proxied("r2", "commander/ota", ota)...), apply,
			"", errs.ErrPermissionDenied, []string{"came from 10.9.9.9", "replica r2's address 10.0.0.2"}},
		{"a member's key from loopback (not its own call)", callFrom("127.0.0.1:5000", r2, proxied("r2", "commander/ota", ota)...), apply,
			"", errs.ErrPermissionDenied, []string{"came from 127.0.0.1"}},
		{"this replica's own call (its dashboard) from loopback, naming no forwarder", callFrom("127.0.0.1:5000", removedSelf, wire.ForwardedIdentityKey, "commander/ota", wire.ForwardedCertKey, b64(ota)), apply,
			"commander 'ota' via replica 'r3' (serial " + identity.Serial(removedSelf) + ")", nil, nil},
		{"another member naming no forwarder", call(r2, wire.ForwardedIdentityKey, "commander/ota", wire.ForwardedCertKey, b64(ota)), apply,
			"", errs.ErrPermissionDenied, []string{"forwarded by \"\""}},
		{"a replica of the previous release forwards no certificate, before the upgrade is finalized", callFrom("10.0.0.4:41000", r4, proxied("r4", "commander/ota")...), apply,
			"commander 'ota' via replica 'r4' (serial " + identity.Serial(r4) + ", a release that forwards no client certificate)", nil, nil},
		{"… but only from its own address", callFrom("10.9.9.9:41000", r4, proxied("r4", "commander/ota")...), apply,
			"", errs.ErrPermissionDenied, []string{"came from 10.9.9.9"}},
		{"… and only for a proxied method", callFrom("10.0.0.4:41000", r4, proxied("r4", "operator/alice")...), grapnelpb.Cluster_SnapshotSave_FullMethodName,
			"", errs.ErrPermissionDenied, []string{"SnapshotSave"}},
		{"a member of this release without a certificate", call(r2, proxied("r2", "commander/ota")...), apply,
			"", errs.ErrPermissionDenied, []string{"no client certificate"}},
		{"a replica's identity is never proxied", call(r2, proxied("r2", "replica/r2", r2)...), apply,
			"", errs.ErrPermissionDenied, []string{"never proxied"}},
		{"certificates without an identity", call(r2, wire.ForwardedByKey, "r2", wire.ForwardedCertKey, b64(alice)), apply,
			"", errs.ErrPermissionDenied, []string{wire.ForwardedCertKey}},
		{"garbage certificates", call(r2, append(proxied("r2", "operator/alice"), wire.ForwardedCertKey, "!!")...), apply,
			"", errs.ErrPermissionDenied, []string{"base64"}},
		{"too many certificates", call(r2, proxied("r2", "operator/alice", alice, alice, alice, alice, alice)...), apply,
			"", errs.ErrPermissionDenied, []string{"at most"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := g.identify(tc.ctx, tc.method)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && Who(id) != tc.want {
				t.Fatalf("identity %s, want %s", Who(id), tc.want)
			}
			for _, w := range tc.naming {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("refusal %q does not name %q", err, w)
				}
			}
		})
	}
}

// BenchmarkAdmit is the guard's cost per call: reading the identity from
// the verified certificate and looking the method up.
func BenchmarkAdmit(b *testing.B) {
	u, _ := url.Parse("grapnel://commander/ota")
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{
		VerifiedChains: [][]*x509.Certificate{{{URIs: []*url.URL{u}}}},
	}}})
	g := &Guard{Untyped: identity.Agent}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.admit(ctx, grapnelpb.Plan_Apply_FullMethodName); err != nil {
			b.Fatal(err)
		}
	}
}
