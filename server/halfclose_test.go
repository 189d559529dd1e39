package server

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// A scripted client sends its requests and half-closes its side (a pipe
// into grpcurl -d @); every request it sent is answered before the
// server ends the stream, at the leader and through a follower's proxy,
// on CliConnection and CommandConnection. An update that waits for its
// commit is among them.
func TestEveryRequestIsAnsweredAfterAHalfClose(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()
	cs, err := rpc.CompleteStateFromTree(manifest(t, proxyManifest))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, at := range []struct {
		name string
		addr string
	}{{"leader", l.addr}, {"follower", f.addr}} {
		for _, kind := range []wire.Kind{wire.KindCLI, wire.KindCommand} {
			t.Run(fmt.Sprintf("%s %v", at.name, kind), func(t *testing.T) {
				n++
				st := rawStream(t, at.addr, kind)
				send := func(m *grpcapi.ToServer) {
					t.Helper()
					if err := st.Send(m); err != nil {
						t.Fatal(err)
					}
				}
				send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}})
				get := &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}
				upd := &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
					NewState: cs, UpdateMask: []string{"desiredState.workloads.web"}}}}
				var want []string
				for i, req := range []*ankbase.Request{get, upd, get, upd} {
					id := fmt.Sprintf("r%d-%d", n, i)
					want = append(want, id)
					r := proto.Clone(req).(*ankbase.Request)
					r.RequestId = id
					send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: r}})
				}
				if err := st.CloseSend(); err != nil {
					t.Fatal(err)
				}
				got, end := answersUntilEnd(t, st, 20*time.Second)
				for _, id := range want {
					if !slices.Contains(got, id) {
						t.Errorf("request %s was not answered before the stream ended (%v); answers: %v", id, end, got)
					}
				}
				if !errors.Is(end, io.EOF) {
					t.Errorf("the stream ended with %v, want a clean end", end)
				}
			})
		}
	}
}

// answersUntilEnd reads st until it ends and returns the request ids of
// the responses and how it ended.
func answersUntilEnd(t *testing.T, st rawClient, bound time.Duration) ([]string, error) {
	t.Helper()
	type result struct {
		ids []string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var ids []string
		for {
			m, err := st.Recv()
			if err != nil {
				done <- result{ids, err}
				return
			}
			if r := m.GetResponse(); r != nil {
				ids = append(ids, r.GetRequestId())
			}
		}
	}()
	select {
	case r := <-done:
		return r.ids, r.err
	case <-time.After(bound):
		t.Fatalf("the stream did not end within %v of the half-close", bound)
	}
	return nil, nil
}
