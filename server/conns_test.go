package server

import (
	"testing"

	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// The leader loop talks to streams only through bounded asynchronous
// queues: a peer that stops reading is dropped instead of blocking the
// loop, and sends to a closed stream fail at once.
//
// swdd~server-uses-async-channels~1
func TestSendQueueDropsStuckPeer(t *testing.T) {
	c := newConn("stuck", wire.KindAgent)
	msg := &grpcapi.FromServer{}
	for i := 0; i < sendQueueLen; i++ {
		if !c.send(msg) {
			t.Fatalf("send %d failed before the queue was full", i)
		}
	}
	if c.send(msg) {
		t.Fatal("send to a full queue succeeded")
	}
	select {
	case <-c.closed:
	default:
		t.Fatal("a stuck peer was not dropped")
	}
	if c.send(msg) {
		t.Fatal("send to a dropped peer succeeded")
	}
}

func TestRegistryReplacesSameName(t *testing.T) {
	r := newRegistry()
	a1, a2 := newConn("a", wire.KindAgent), newConn("a", wire.KindAgent)
	if old := r.add(a1); old != nil {
		t.Fatal("unexpected old connection")
	}
	if old := r.add(a2); old != a1 {
		t.Fatal("second hello did not replace the first")
	}
	if r.remove(a1) {
		t.Fatal("removing the replaced connection removed the new one")
	}
	if r.agent("a") != a2 || !r.remove(a2) || r.agent("a") != nil {
		t.Fatal("registry bookkeeping wrong")
	}
}
