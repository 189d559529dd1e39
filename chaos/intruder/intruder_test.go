package intruder

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// The Raft probe is answered by a plain hashicorp/raft transport (what
// the issue found) and not by a port that speaks TLS.
func TestRaftCall(t *testing.T) {
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	go func() {
		for r := range tr.Consumer() {
			switch r.Command.(type) {
			case *raft.AppendEntriesRequest:
				r.Respond(&raft.AppendEntriesResponse{Term: 5}, nil)
			default:
				r.Respond(&raft.RequestVoteResponse{Term: 5}, nil)
			}
		}
	}()
	for _, typ := range []uint8{rpcAppendEntries, rpcRequestVote} {
		conn, err := net.Dial("tcp", string(tr.LocalAddr()))
		if err != nil {
			t.Fatal(err)
		}
		if err := raftCall(conn, typ); err != nil {
			t.Fatalf("%s: a plain Raft port did not answer: %v", rpcNames[typ], err)
		}
		conn.Close()
	}

	ca := rpctest.NewCA(t)
	cfg, err := rpc.ServerTLSConfig(ca.Issue(t, "server", rpc.ServerName))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := raftCall(conn, rpcAppendEntries); err == nil {
		t.Fatal("a TLS port answered a plain Raft RPC")
	}
}

func TestIsTLSRecords(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want bool
	}{
		{[]byte{0x16, 3, 3, 0, 10}, true}, {[]byte{0x15, 3, 1}, true},
		{[]byte("\x00\x00\x12\x04\x00\x00\x00\x00\x00"), false}, // an HTTP/2 SETTINGS frame
		{[]byte{0x16}, false}, {nil, false},
	} {
		if got := isTLSRecords(c.b); got != c.want {
			t.Errorf("isTLSRecords(%x) = %v, want %v", c.b, got, c.want)
		}
	}
}

// The flood's judgement: more connections held than the cap, or one
// open past the deadline, is an accepted attack.
func TestJudgeFlood(t *testing.T) {
	closed := func(d time.Duration) floodConn { return floodConn{open: d} }
	conns := func(n int, fc floodConn) []floodConn {
		out := make([]floodConn, n)
		for i := range out {
			out[i] = fc
		}
		return out
	}
	capped := append(conns(4, closed(5*time.Second)), conns(4, closed(2*time.Millisecond))...)
	if over, d, held, hd := judgeFlood(capped, 4, 5*time.Second); over || held {
		t.Fatalf("a capped flood judged accepted: %v %s; %v %s", over, d, held, hd)
	}
	uncapped := conns(8, closed(5*time.Second))
	if over, d, _, _ := judgeFlood(uncapped, 4, 5*time.Second); !over {
		t.Fatalf("8 connections held with a cap of 4 judged refused: %s", d)
	}
	lingering := append(conns(4, floodConn{stillOpen: true}), conns(4, closed(time.Millisecond))...)
	if _, _, held, hd := judgeFlood(lingering, 4, 5*time.Second); !held {
		t.Fatalf("connections open past the deadline judged refused: %s", hd)
	}
}

// flood against a listener that holds every connection: the attack gets
// through; against one that closes those over a cap at once and the
// rest after a deadline, it is refused.
func TestFloodAgainstListeners(t *testing.T) {
	const capN, deadline = 3, 300 * time.Millisecond
	serve := func(t *testing.T, handle func(i int, c net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for i := 0; ; i++ {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go handle(i, c)
			}
		}()
		return ln.Addr().String()
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	open := serve(t, func(_ int, c net.Conn) {
		<-release
		c.Close()
	})
	res := flood(context.Background(), net.Dialer{Timeout: time.Second}, open, 2*capN, deadline+deadlineMargin)
	if over, d, heldAcc, hd := judgeFlood(res.conns, capN, deadline); !over || !heldAcc {
		t.Fatalf("a port that holds everything judged refused: %s; %s", d, hd)
	}
	capped := serve(t, func(i int, c net.Conn) {
		if i >= capN {
			c.Close()
			return
		}
		timer := time.NewTimer(deadline)
		defer timer.Stop()
		<-timer.C
		c.Close()
	})
	res = flood(context.Background(), net.Dialer{Timeout: time.Second}, capped, 2*capN, deadline+deadlineMargin)
	if over, d, heldAcc, hd := judgeFlood(res.conns, capN, deadline); over || heldAcc {
		t.Fatalf("a capped port judged accepted: %s; %s", d, hd)
	}
}

// A metrics port that answers from another host is an accepted attack;
// one that refuses the connection is not.
func TestMetricsAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("grapnel_up 1\n")) }))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	c := Config{Targets: []Target{{Name: "r1", GRPC: net.JoinHostPort(host, "1")}}, Bounds: Bounds{MetricsPort: p}}
	as := metricsAttempts(context.Background(), c)
	if len(as) != 1 || !as[0].Accepted {
		t.Fatalf("a served /metrics judged refused: %+v", as)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	ln.Close() // nothing listens there now
	c.Bounds.MetricsPort, _ = strconv.Atoi(port)
	as = metricsAttempts(context.Background(), c)
	if len(as) != 1 || as[0].Accepted || !strings.Contains(as[0].Detail, "refused") {
		t.Fatalf("a closed port judged otherwise: %+v", as)
	}
}

// The render bomb: each workload alone renders within the per-template
// limit, and bombSize of them exceed the request's budget, as the
// server's renderer counts.
func TestRenderBombExceedsTheBudget(t *testing.T) {
	for _, budget := range []int{300000} {
		n, err := bombSize(budget)
		if err != nil {
			t.Fatal(err)
		}
		bomb := renderBomb(n)
		one := render.NewBudget(0, 0)
		w := bomb.Workloads["intruder_bomb_00"]
		if _, _, err := render.New().WorkloadWithin("intruder_bomb_00", w, bomb.Configs, one); err != nil {
			t.Fatalf("one bomb workload does not render alone: %v", err)
		}
		if len(w.RuntimeConfig) > 200 {
			t.Fatalf("a bomb workload is not small: %d bytes", len(w.RuntimeConfig))
		}
		b := render.NewBudget(budget, 0)
		var ranOut error
		for _, name := range state.SortedKeys(bomb.Workloads) {
			if _, _, err := render.New().WorkloadWithin(name, bomb.Workloads[name], bomb.Configs, b); err != nil {
				ranOut = err
				break
			}
		}
		if !errors.Is(ranOut, state.ErrBudget) {
			t.Fatalf("budget %d: %d bomb workloads of %d steps each did not run out: %v", budget, n, one.Steps(), ranOut)
		}
	}
}

// Of the removed replicas' keys, the last removed at the revocation's
// cluster version owes the revocation's refusal; the last removed below
// it is tried with none owed (its removal revoked nothing); with no key
// of the first kind, those attempts are not tried.
func TestRemovedKeysSplitByClusterVersion(t *testing.T) {
	key := func(name string, v uint32) RemovedKey {
		return RemovedKey{Files: rpc.TLSFiles{Cert: name + ".crt"}, ClusterVersion: v}
	}
	for _, c := range []struct {
		name             string
		removed          []RemovedKey
		revoked, notRevd string // cert of each key tried; "" none
	}{
		{"none removed", nil, "", ""},
		{"removed at 1", []RemovedKey{key("a", 1)}, "a.crt", ""},
		{"removed at 0", []RemovedKey{key("a", 0)}, "", "a.crt"},
		{"both, the last of each", []RemovedKey{key("a", 0), key("b", 1), key("c", 0), key("d", 1)}, "d.crt", "c.crt"},
	} {
		ks := removedKeys(c.removed)
		if ks[0].refusal != codes.Unauthenticated || ks[0].notExpected != "" || ks[0].files.Cert != c.revoked || (ks[0].skipped == "") != (c.revoked != "") {
			t.Errorf("%s: the revoked key %+v, want cert %q (skipped when none)", c.name, ks[0], c.revoked)
		}
		switch {
		case c.notRevd == "" && len(ks) != 1:
			t.Errorf("%s: %d keys, want only the revoked one", c.name, len(ks))
		case c.notRevd != "" && (len(ks) != 2 || ks[1].files.Cert != c.notRevd || ks[1].notExpected != NotRevoked || ks[1].skipped != ""):
			t.Errorf("%s: keys %+v, want a second with cert %q, not expected refused", c.name, ks, c.notRevd)
		}
	}
}

// The forwarded attempts with a key removed at cluster version 0 carry
// NotRevoked, however they end; those with the key removed at 1 owe the
// refusal and, unanswered (the target's port is closed), count as
// accepted.
func TestForwardedAttemptsWithKeyRemovedAtZero(t *testing.T) {
	set, err := pki.Make(t.TempDir(), []string{"r1", "r2", "r3", "r4"}, []string{"agent_h1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	cfg := Config{Leader: "r1", Targets: []Target{{Name: "r1", GRPC: closed}}, StrayReplica: set.StrayReplica, Member: set.Replicas["r2"],
		Removed:      []RemovedKey{{Files: set.Replicas["r3"], ClusterVersion: 1}, {Files: set.Replicas["r4"], ClusterVersion: 0}},
		OperatorCert: set.Operator.Cert, AgentCert: set.Agents["agent_h1"].Cert, Workload: "intruder_wl"}
	var revoked, notRevoked int
	for _, a := range forwardedAttempts(context.Background(), cfg) {
		switch {
		case strings.Contains(a.What, "removed at cluster version 0"):
			notRevoked++
			if a.NotExpected != NotRevoked || a.Skipped != "" {
				t.Errorf("%s: not expected %q, skipped %q", a.What, a.NotExpected, a.Skipped)
			}
		case strings.Contains(a.What, "revoked certificate"):
			revoked++
			if a.NotExpected != "" || !a.Accepted {
				t.Errorf("%s: not expected %q, accepted %v (%s): an unanswered call with a revoked key must count", a.What, a.NotExpected, a.Accepted, a.Detail)
			}
		case a.NotExpected != "":
			t.Errorf("%s: not expected %q", a.What, a.NotExpected)
		}
	}
	if revoked != 3 || notRevoked != 3 {
		t.Errorf("%d attempts with the revoked key and %d with the one removed at 0, want 3 and 3", revoked, notRevoked)
	}
}
