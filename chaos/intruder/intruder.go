package intruder

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Target is one replica's ports.
type Target struct {
	Name   string `json:"name"`
	GRPC   string `json:"grpc"`
	Raft   string `json:"raft"`
	Gossip string `json:"gossip"`
}

// Config is what one intrusion tries.
type Config struct {
	Targets []Target `json:"targets"`
	// Leader and Follower name the targets of the attacks aimed at one
	// replica of each role (leadership as the campaign saw it when it
	// wrote the configuration).
	Leader   string `json:"leader"`
	Follower string `json:"follower"`
	// WrongRole is a certificate the CA signed for another role (an
	// agent); Foreign one from a CA the replicas do not trust.
	WrongRole rpc.TLSFiles `json:"wrongRole"`
	Foreign   rpc.TLSFiles `json:"foreign"`
	// Keys a replica's: StrayReplica is a replica certificate of the CA
	// for a replica never admitted; Removed are the keys of replicas an
	// operator removed, in the order removed, each with the cluster
	// version at its removal (the last removed at each of 0 and 1 or
	// above is tried); Member is a current member's key, as if stolen
	// from its unit.
	StrayReplica rpc.TLSFiles `json:"strayReplica"`
	Removed      []RemovedKey `json:"removed"`
	Member       rpc.TLSFiles `json:"member"`
	// Commander is a commander's certificate; Impostor a commander's
	// named as the operator is.
	Commander rpc.TLSFiles `json:"commander"`
	Impostor  rpc.TLSFiles `json:"impostor"`
	// OperatorCert and AgentCert are certificates without their keys
	// (certificates are public): the operator's and a real agent's, which
	// the intruder forwards as the client it claims to proxy.
	OperatorCert string `json:"operatorCert"`
	AgentCert    string `json:"agentCert"`
	// Victim is an existing process workload on an agent: the commander
	// tries to widen its privileges and follows its logs. OtherUID is the
	// uid of another workload on that agent (the range 60000-60999).
	Victim   string `json:"victim"`
	OtherUID int    `json:"otherUid"`
	// Lock is an object ("workload/NAME") the operator holds a lock on;
	// LockClusterVersion is the cluster version when it was taken: below
	// state.ClusterVersionRevocation a lock's owner is its holder's name
	// only, so a commander named as the operator is the same owner
	// (docs/locks.md, docs/upgrade.md), and the release without force
	// owes no refusal (NotOwnerByRole).
	Lock               string `json:"lock"`
	LockClusterVersion uint32 `json:"lockClusterVersion"`
	// Bounds are the replicas' bounds the intruder tries to pass.
	Bounds Bounds `json:"bounds"`
	// FloodSource is the address the flood's connections come from, one
	// the campaign's clients do not use ("" lets the system choose).
	FloodSource string `json:"floodSource"`
	// Replay is a file of bytes an operator's client sent to ReplayTo,
	// captured on the way; empty skips the replay.
	Replay   string `json:"replay"`
	ReplayTo string `json:"replayTo"`
	// GossipName is the id the intruder announces in gossip as a server.
	GossipName string `json:"gossipName"`
	// Workload and Agent are the names an accepted attempt would leave
	// in the state.
	Workload string `json:"workload"`
	Agent    string `json:"agent"`
	// Hold is how long the intruder stays in gossip.
	Hold time.Duration `json:"hold"`
}

// RemovedKey is a removed replica's key and the cluster version when the
// operator removed it: a removal revokes the replica's certificates only
// at state.ClusterVersionRevocation or above (docs/upgrade.md), so only
// then does a call with the key owe the revocation's refusal.
type RemovedKey struct {
	Files          rpc.TLSFiles `json:"files"`
	ClusterVersion uint32       `json:"clusterVersion"`
}

// NotRevoked is why a key removed below state.ClusterVersionRevocation is
// not expected refused.
const NotRevoked = "not expected refused: revocation waits for cluster version 1 (docs/upgrade.md)"

// NotOwnerByRole is why the release of a lock taken below
// state.ClusterVersionRevocation, by a commander named as its holder, is
// not expected refused.
const NotOwnerByRole = "not expected refused: lock owners are role and name from cluster version 1; the lock was taken at cluster version 0, where the owner is the name only (docs/upgrade.md)"

// Bounds are the settings of the replicas (their flags) that the
// intruder tries to exceed; a zero field skips the attempts on it.
type Bounds struct {
	ConnsPerSource   int           `json:"connsPerSource"`   // --grpc-max-conns-per-source
	HandshakeTimeout time.Duration `json:"handshakeTimeout"` // --grpc-handshake-timeout
	StreamsPerAgent  int           `json:"streamsPerAgent"`  // --max-streams-per-agent
	HelloTimeout     time.Duration `json:"helloTimeout"`     // --hello-timeout
	LogCampaigns     int           `json:"logCampaigns"`     // --max-log-campaigns-per-requester
	RenderSteps      int           `json:"renderSteps"`      // --max-render-steps-per-request
	MetricsPort      int           `json:"metricsPort"`      // the port of --metrics-address :PORT
}

// Attempt is one try and what came of it. Accepted means the attack got
// through, or that the replica's answer was not the refusal it should
// give (no answer at all included): either fails the campaign. Skipped
// says why an attack could not be tried this time (the intruder held no
// such key yet); it counts neither way.
type Attempt struct {
	Target   string `json:"target"`
	Channel  string `json:"channel"` // grpc, raft, gossip, replay, forward, policy, locks, logs, render, streams, connections, metrics
	What     string `json:"what"`
	Accepted bool   `json:"accepted"`
	Skipped  string `json:"skipped,omitempty"`
	// NotExpected, when set, says why the attempt was made with no
	// refusal owed (a key whose removal revoked nothing): Detail tells
	// how it ended, and it counts neither way. What it left in the
	// cluster still counts (the campaign's traces).
	NotExpected string `json:"notExpected,omitempty"`
	Detail      string `json:"detail"`
	// Window is when the attack ran, for attacks whose effect on the
	// cluster the campaign measures meanwhile (the flood, the dry-run).
	Window *Window `json:"window,omitempty"`
}

// Window is a span of wall-clock time.
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Names of the attacks whose Window the campaign reads.
const (
	WhatFlood   = "idle TCP connections to the leader's gRPC port, twice --grpc-max-conns-per-source from one source"
	WhatHeld    = "idle TCP connections held past --grpc-handshake-timeout"
	WhatDryRun  = "a commander's dry-run whose nested #each loops exceed --max-render-steps-per-request"
	WhatNoHello = "an agent stream held open without AgentHello"
)

// attemptTimeout bounds one try: a refused peer answers at once.
const attemptTimeout = 3 * time.Second

// Run tries everything and returns the attempts. The attacks that wait
// for a deadline of the replicas (the gossip hold, the flood's handshake
// deadline, the streams' hello timeout) run together at the end.
func Run(ctx context.Context, c Config) []Attempt {
	var out []Attempt
	for _, t := range c.Targets {
		out = append(out, grpcAttempts(ctx, t, c)...)
		out = append(out, raftAttempts(t, c)...)
	}
	if c.Replay != "" {
		out = append(out, replay(c.Replay, c.ReplayTo))
	}
	out = append(out, forwardedAttempts(ctx, c)...)
	out = append(out, wideningAttempts(ctx, c)...)
	out = append(out, lockAttempts(ctx, c)...)
	out = append(out, logCampaignAttempt(ctx, c))
	out = append(out, renderBombAttempt(ctx, c))
	out = append(out, metricsAttempts(ctx, c)...)
	var (
		wg                    sync.WaitGroup
		gossip, flood, stream []Attempt
	)
	wg.Go(func() { gossip = []Attempt{gossipJoin(ctx, c)} })
	wg.Go(func() { flood = floodAttempts(ctx, c) })
	wg.Go(func() { stream = streamAttempts(ctx, c) })
	wg.Wait()
	return append(append(append(out, gossip...), flood...), stream...)
}

// target is the target named name.
func (c Config) target(name string) (Target, bool) {
	for _, t := range c.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// leaderAndFollower are the targets Leader and Follower name, those
// found.
func (c Config) leaderAndFollower() []Target {
	var out []Target
	for _, n := range []string{c.Leader, c.Follower} {
		if t, ok := c.target(n); ok {
			out = append(out, t)
		}
	}
	return out
}

// Save writes the attempts as JSON.
func Save(path string, as []Attempt) error {
	b, err := json.MarshalIndent(as, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads what Save wrote.
func Load(path string) ([]Attempt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var as []Attempt
	return as, json.Unmarshal(b, &as)
}

// grpcAttempts speaks to the gRPC port: Status with no TLS, with TLS and
// no certificate, with a foreign certificate; with the wrong role a
// snapshot save, a replica removal, a desired-state update and another
// agent's hello.
func grpcAttempts(ctx context.Context, t Target, c Config) []Attempt {
	var out []Attempt
	probe := func(what string, creds credentials.TransportCredentials) {
		a := Attempt{Target: t.Name, Channel: "grpc", What: what}
		cc, err := grpc.NewClient(t.GRPC, grpc.WithTransportCredentials(creds))
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			_, err = grapnelpb.NewClusterClient(cc).Status(cctx, &grapnelpb.StatusRequest{})
			cancel()
			cc.Close()
		}
		a.Accepted, a.Detail = err == nil, errText(err)
		out = append(out, a)
	}
	probe("Status without TLS", insecure.NewCredentials())
	probe("Status with TLS and no certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // the intruder does not care who answers
	if tc, err := clientTLS(c.Foreign); err == nil {
		probe("Status with a foreign CA's certificate", credentials.NewTLS(tc))
	}
	tc, err := clientTLS(c.WrongRole)
	if err != nil {
		return append(out, Attempt{Target: t.Name, Channel: "grpc", What: "wrong-role certificate", Detail: "not loaded: " + err.Error()})
	}
	cc, err := grpc.NewClient(t.GRPC, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		return append(out, Attempt{Target: t.Name, Channel: "grpc", What: "wrong-role certificate", Detail: err.Error()})
	}
	defer cc.Close()
	cl := grapnelpb.NewClusterClient(cc)
	{
		a := Attempt{Target: t.Name, Channel: "grpc", What: "SnapshotSave with an agent certificate"}
		cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		st, err := cl.SnapshotSave(cctx, &grapnelpb.SnapshotSaveRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		cancel()
		a.Accepted, a.Detail = err == nil, errText(err)
		out = append(out, a)
	}
	{
		a := Attempt{Target: t.Name, Channel: "grpc", What: "RemoveReplica with an agent certificate"}
		cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		_, err := cl.RemoveReplica(cctx, &grapnelpb.RemoveReplicaRequest{Id: c.GossipName})
		cancel()
		// A leader that took the call and found nothing to remove still
		// accepted it from the wrong role; a follower's NotLeader answer
		// says nothing about rights and is not counted either way.
		a.Accepted = err == nil || status.Code(err) == codes.NotFound
		a.Detail = errText(err)
		out = append(out, a)
	}
	out = append(out, updateAttempt(ctx, t, cc, c.Workload))
	out = append(out, helloAttempt(ctx, t, cc))
	return out
}

// updateAttempt asks, with an agent's certificate, for a workload in
// the desired state; accepted when the answer is a success.
func updateAttempt(ctx context.Context, t Target, cc *grpc.ClientConn, workload string) Attempt {
	a := Attempt{Target: t.Name, Channel: "grpc", What: "UpdateState with an agent certificate"}
	s, err := openSession(ctx, cc, attemptTimeout)
	if err != nil {
		a.Detail = errText(err)
		return a
	}
	defer s.close()
	r, err := s.request(addWorkload(workload))
	if err != nil {
		a.Detail = errText(err)
		return a
	}
	a.Accepted = r.GetUpdateStateSuccess() != nil
	a.Detail = fmt.Sprintf("answered %v", r.GetResponseContent())
	return a
}

// helloAttempt says AgentHello as another agent, which the certificate
// does not name; accepted when the server greets it.
func helloAttempt(ctx context.Context, t Target, cc *grpc.ClientConn) Attempt {
	a := Attempt{Target: t.Name, Channel: "grpc", What: "AgentHello as agent_h1 with another agent's certificate"}
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	st, err := wire.KindAgent.Open(cctx, cc)
	if err != nil {
		a.Detail = errText(err)
		return a
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_h1", ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		a.Detail = errText(err)
		return a
	}
	for {
		m, err := st.Recv()
		if err != nil {
			a.Detail = errText(err)
			return a
		}
		if m.GetServerHello() != nil {
			a.Accepted, a.Detail = true, "greeted with a ServerHello"
			return a
		}
	}
}

// raftAttempts sends Raft RPCs that change nothing even when answered (a
// heartbeat and a vote request of term 0, which every replica rejects as
// stale) over plain TCP and over TLS with the wrong-role certificate; an
// answer of any kind means the port took an unauthenticated peer.
func raftAttempts(t Target, c Config) []Attempt {
	var out []Attempt
	dialers := []struct {
		what string
		dial func() (net.Conn, error)
	}{
		{"plain TCP", func() (net.Conn, error) { return net.DialTimeout("tcp", t.Raft, attemptTimeout) }},
		{"TLS with an agent certificate", func() (net.Conn, error) {
			tc, err := clientTLS(c.WrongRole)
			if err != nil {
				return nil, err
			}
			tc.InsecureSkipVerify = true //nolint:gosec // the intruder does not care who answers
			d := &net.Dialer{Timeout: attemptTimeout}
			return tls.DialWithDialer(d, "tcp", t.Raft, tc)
		}},
	}
	for _, d := range dialers {
		for _, rpcType := range []uint8{rpcAppendEntries, rpcRequestVote} {
			a := Attempt{Target: t.Name, Channel: "raft", What: fmt.Sprintf("%s over %s", rpcNames[rpcType], d.what)}
			conn, err := d.dial()
			if err == nil {
				err = raftCall(conn, rpcType)
				conn.Close()
			}
			a.Accepted, a.Detail = err == nil, errText(err)
			out = append(out, a)
		}
	}
	return out
}

// hashicorp/raft's NetworkTransport RPC types.
const (
	rpcAppendEntries uint8 = 0
	rpcRequestVote   uint8 = 1
)

var rpcNames = map[uint8]string{rpcAppendEntries: "AppendEntries (term 0)", rpcRequestVote: "RequestVote (term 0)"}

// raftCall sends one RPC the way NetworkTransport frames it (the type
// byte, then the msgpack request) and reads the answer (an error string,
// then the msgpack response); nil when an answer came.
func raftCall(conn net.Conn, rpcType uint8) error {
	_ = conn.SetDeadline(time.Now().Add(attemptTimeout))
	w := bufio.NewWriter(conn)
	enc := codec.NewEncoder(w, &codec.MsgpackHandle{})
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(conn.LocalAddr().String())}
	var req, resp any
	switch rpcType {
	case rpcAppendEntries:
		req, resp = &raft.AppendEntriesRequest{RPCHeader: hdr}, &raft.AppendEntriesResponse{}
	default:
		req, resp = &raft.RequestVoteRequest{RPCHeader: hdr}, &raft.RequestVoteResponse{}
	}
	if err := w.WriteByte(rpcType); err != nil {
		return err
	}
	if err := enc.Encode(req); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	dec := codec.NewDecoder(bufio.NewReader(conn), &codec.MsgpackHandle{})
	var rpcErr string
	if err := dec.Decode(&rpcErr); err != nil {
		return err
	}
	if err := dec.Decode(resp); err != nil {
		return err
	}
	return nil
}

// replay sends bytes captured from an operator's connection to the same
// replica and reads for a while; it counts as accepted when anything
// comes back that is not a TLS alert, or when the replica answers in
// plain HTTP/2 (what an insecure replica would do). The campaign also
// checks that the replayed update left no trace.
func replay(path, to string) Attempt {
	a := Attempt{Target: to, Channel: "replay", What: "bytes an operator's client sent, replayed"}
	data, err := os.ReadFile(path)
	if err != nil {
		a.Detail = "no capture: " + err.Error()
		return a
	}
	conn, err := net.DialTimeout("tcp", to, attemptTimeout)
	if err != nil {
		a.Detail = errText(err)
		return a
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(attemptTimeout))
	if _, err := conn.Write(data); err != nil {
		a.Detail = errText(err)
		return a
	}
	got, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	switch {
	case len(got) == 0:
		a.Detail = "nothing came back: " + errText(err)
	case isTLSRecords(got):
		// A fresh server hello and then an alert: the handshake cannot go
		// on, since the captured client messages answer another hello.
		a.Detail = fmt.Sprintf("%d bytes of TLS records back (a new handshake, then the end): %s", len(got), errText(err))
	default:
		a.Accepted, a.Detail = true, fmt.Sprintf("%d bytes of plain data back", len(got))
	}
	return a
}

// isTLSRecords reports whether b starts with a TLS record header
// (handshake or alert, TLS 1.x).
func isTLSRecords(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16 || b[0] == 0x14 || b[0] == 0x17) && b[1] == 3
}

func clientTLS(f rpc.TLSFiles) (*tls.Config, error) {
	if f.Empty() {
		return nil, errors.New("no certificate given")
	}
	return rpc.ClientTLSConfig(f, rpc.ServerName)
}

func errText(err error) string {
	if err == nil {
		return "answered"
	}
	return err.Error()
}

func ptr[T any](v T) *T { return &v }
