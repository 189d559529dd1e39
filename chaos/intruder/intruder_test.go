package intruder

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
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
