package intruder

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// replicaKey is a replica's key the intruder holds, how it came by it,
// and the refusal a replica owes a call made with it.
type replicaKey struct {
	label string // "a replica certificate never admitted", ...
	files rpc.TLSFiles
	// skipped says why the intruder holds no such key this time.
	skipped string
	refusal codes.Code
	// source, when set, is the address the calls leave from: not the
	// key's replica's own.
	source string
	// notExpected, when set, says why no refusal is owed (Attempt.NotExpected).
	notExpected string
}

// removedKeys are the removed replicas' keys the intruder tries: the last
// one removed at the revocation's cluster version or above, whose calls
// owe UNAUTHENTICATED (skipped when there is none), and the last one
// removed below it, if any, whose removal revoked nothing: tried and
// reported, with no refusal owed.
func removedKeys(removed []RemovedKey) []replicaKey {
	revoked := replicaKey{label: "a removed replica's revoked certificate", refusal: codes.Unauthenticated,
		skipped: fmt.Sprintf("no replica was removed at cluster version %d or above before this intrusion (a replace-replica fault gives the intruder the old key)",
			state.ClusterVersionRevocation)}
	var unrevoked *replicaKey
	for _, k := range removed {
		if k.ClusterVersion >= state.ClusterVersionRevocation {
			revoked.files, revoked.skipped = k.Files, ""
			continue
		}
		unrevoked = &replicaKey{label: fmt.Sprintf("a replica's certificate removed at cluster version %d", k.ClusterVersion), files: k.Files,
			refusal: codes.Unauthenticated, notExpected: NotRevoked}
	}
	out := []replicaKey{revoked}
	if unrevoked != nil {
		out = append(out, *unrevoked)
	}
	return out
}

// forwardedAttempts pose as a follower's proxy (issue 27, hole 1): the
// calls carry grapnel-forwarded-by (the key's own replica name, so that
// only the deeper checks can refuse them), grapnel-forwarded-identity
// and grapnel-forwarded-cert with the operator's or an agent's
// certificate (public; the attacker may hold it), to the leader and to a
// follower. With a replica certificate never admitted and with a removed
// replica's revoked one: a snapshot save, a desired-state update and an
// agent's hello, each as the client forwarded. With a current member's
// key, which may forward clients: what no proxy forwards (a snapshot
// save, a leadership transfer), an operator's name without the
// operator's certificate, and an update and an agent's hello with their
// certificates from the intruder's host, not from the member's address.
func forwardedAttempts(ctx context.Context, c Config) []Attempt {
	op, err := loadPublicCert(c.OperatorCert)
	if err != nil {
		return []Attempt{{Channel: "forward", What: "forwarded identities", Accepted: true, Detail: "could not try: the operator's certificate: " + err.Error()}}
	}
	ag, err := loadPublicCert(c.AgentCert)
	if err != nil {
		return []Attempt{{Channel: "forward", What: "forwarded identities", Accepted: true, Detail: "could not try: an agent's certificate: " + err.Error()}}
	}
	stray := replicaKey{label: "a replica certificate never admitted", files: c.StrayReplica, refusal: codes.PermissionDenied}
	member := replicaKey{label: "a member replica's key", files: c.Member, refusal: codes.PermissionDenied}
	elsewhere := member
	elsewhere.source = c.FloodSource
	var out []Attempt
	for _, t := range c.leaderAndFollower() {
		for _, k := range append([]replicaKey{stray}, removedKeys(c.Removed)...) {
			out = append(out,
				forwardUnary(ctx, t, k, fmt.Sprintf("SnapshotSave forwarding operator %s with its certificate, with %s", op.id.Name, k.label), op, true, snapshotSave),
				forwardUpdate(ctx, t, k, fmt.Sprintf("UpdateState on a CLI stream forwarding operator %s with its certificate, with %s", op.id.Name, k.label), op, c.Workload, true),
				forwardHello(ctx, t, k, fmt.Sprintf("AgentHello as %s forwarding its certificate, with %s", ag.id.Name, k.label), ag))
		}
		out = append(out,
			forwardUnary(ctx, t, member, fmt.Sprintf("SnapshotSave forwarding operator %s with its certificate, with %s (not a proxied method)", op.id.Name, member.label), op, true, snapshotSave),
			forwardUnary(ctx, t, member, fmt.Sprintf("TransferLeadership forwarding operator %s with its certificate, with %s (not a proxied method)", op.id.Name, member.label), op, true,
				transferTo(c.Leader)),
			forwardUpdate(ctx, t, member, fmt.Sprintf("UpdateState on a CLI stream forwarding operator %s without its certificate, with %s", op.id.Name, member.label), op, c.Workload, false),
			// The stolen member key with the operator's (public)
			// certificate, from the intruder's host: a proxy dials from
			// its replica's Raft address, so this comes from elsewhere.
			forwardUpdate(ctx, t, elsewhere, fmt.Sprintf("UpdateState on a CLI stream forwarding operator %s with its certificate, with %s from another host", op.id.Name, member.label), op, c.Workload, true),
			forwardHello(ctx, t, elsewhere, fmt.Sprintf("AgentHello as %s forwarding its certificate, with %s from another host", ag.id.Name, member.label), ag))
	}
	return out
}

// forwardMD is the metadata of a proxied call: by the key's replica,
// for client, with or without its certificate.
func forwardMD(by identity.Identity, client publicCert, withCert bool) []string {
	md := []string{wire.ForwardedByKey, by.Name, wire.ForwardedIdentityKey, authz.Encode(client.id)}
	if withCert {
		md = append(md, wire.ForwardedCertKey, client.der)
	}
	return md
}

// begin starts an attempt with key k on t: it loads the key's identity
// and dials; a skipped key or one that cannot be used ends the attempt.
func begin(t Target, k replicaKey, what string) (Attempt, identity.Identity, *grpc.ClientConn, bool) {
	a := Attempt{Target: t.Name, Channel: "forward", What: what, NotExpected: k.notExpected}
	if k.skipped != "" {
		a.Skipped = k.skipped
		return a, identity.Identity{}, nil, false
	}
	by, err := certName(k.files)
	if err == nil {
		var cc *grpc.ClientConn
		if cc, err = dialFrom(t.GRPC, k.files, k.source); err == nil {
			return a, by, cc, true
		}
	}
	a.Accepted, a.Detail = true, "could not try: "+err.Error()
	return a, by, nil, false
}

// judge sets the outcome of a forwarded call from its error: refused
// only with the key's refusal code.
func judge(a *Attempt, by identity.Identity, k replicaKey, err error) {
	a.Accepted = !refusedWith(err, k.refusal)
	a.Detail = fmt.Sprintf("key of %s (serial %s): %s", by.Name, by.Serial, errText(err))
}

// snapshotSave asks for a snapshot and reads its first chunk.
func snapshotSave(ctx context.Context, cc *grpc.ClientConn) error {
	st, err := grapnelpb.NewClusterClient(cc).SnapshotSave(ctx, &grapnelpb.SnapshotSaveRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	return err
}

// transferTo asks leadership to move to to (the leader itself: were it
// let through, the answer would be an error of another kind, and no
// leadership would move).
func transferTo(to string) func(context.Context, *grpc.ClientConn) error {
	return func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := grapnelpb.NewClusterClient(cc).TransferLeadership(ctx, &grapnelpb.TransferLeadershipRequest{To: to})
		return err
	}
}

// forwardUnary makes call with the forwarded identity of client.
func forwardUnary(ctx context.Context, t Target, k replicaKey, what string, client publicCert, withCert bool,
	call func(context.Context, *grpc.ClientConn) error) Attempt {
	a, by, cc, ok := begin(t, k, what)
	if !ok {
		return a
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, forwardMD(by, client, withCert)...), attemptTimeout)
	defer cancel()
	judge(&a, by, k, call(cctx, cc))
	return a
}

// forwardUpdate asks, on a CLI stream forwarded as client, for workload
// in the desired state.
func forwardUpdate(ctx context.Context, t Target, k replicaKey, what string, client publicCert, workload string, withCert bool) Attempt {
	a, by, cc, ok := begin(t, k, what)
	if !ok {
		return a
	}
	defer cc.Close()
	s, err := openSession(ctx, cc, attemptTimeout, forwardMD(by, client, withCert)...)
	if err != nil {
		judge(&a, by, k, err)
		return a
	}
	defer s.close()
	r, err := s.request(addWorkload(workload))
	if err != nil {
		judge(&a, by, k, err)
		return a
	}
	a.Accepted = true
	a.Detail = fmt.Sprintf("key of %s: the stream was taken and answered %v", by.Name, r.GetResponseContent())
	return a
}

// forwardHello says AgentHello as client's agent on an agent stream
// forwarded with its certificate; a ServerHello would hand the intruder
// the agent's workloads.
func forwardHello(ctx context.Context, t Target, k replicaKey, what string, client publicCert) Attempt {
	a, by, cc, ok := begin(t, k, what)
	if !ok {
		return a
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, forwardMD(by, client, true)...), attemptTimeout)
	defer cancel()
	st, err := wire.KindAgent.Open(cctx, cc)
	if err == nil {
		// A stream the replica refused at once ends the Send with io.EOF;
		// its status comes with the Recv below.
		if err = st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
			AgentName: client.id.Name, ProtocolVersion: rpc.ProtocolVersion}}}); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	for err == nil {
		var m *grpcapi.FromServer
		if m, err = st.Recv(); err == nil && m.GetServerHello() != nil {
			a.Accepted, a.Detail = true, fmt.Sprintf("key of %s: greeted with a ServerHello for %s", by.Name, client.id.Name)
			return a
		}
	}
	judge(&a, by, k, err)
	return a
}

// addWorkload is an update that puts workload, a process running
// /bin/true, into the desired state.
func addWorkload(workload string) *ankbase.Request {
	wl := &ankbase.Workload{Runtime: ptr("process"), RuntimeConfig: ptr("command: /bin/true")}
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1",
			Workloads: &ankbase.WorkloadMap{Workloads: map[string]*ankbase.Workload{workload: wl}}}},
		UpdateMask: []string{"desiredState.workloads." + workload}}}}
}
