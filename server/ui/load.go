package ui

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// The agents' load reports (CPU usage, free memory) live in the leader's
// memory only: they change every few seconds, and writing them to Raft
// would cost every replica's flash for nothing. The replicated store the
// rest of the dashboard reads has none, so the dashboard asks the leader
// for them, as `grapnel get state agents` does, and keeps the answer for
// LoadRefreshInterval: pages opened together share one question, and an
// open page asks again at that pace while nothing else changes.

// AgentLoadSource answers the agents' last load reports as the leader
// knows them, by agent name.
type AgentLoadSource func(ctx context.Context) (map[string]state.AgentStatus, error)

// LoadRefreshInterval is how long a load answer is kept, and how often an
// open page is pushed the loads again while nothing else changed. Agents
// report every 2 s by default (agent.DefaultLoadInterval).
const LoadRefreshInterval = 2 * time.Second

// loadTimeout bounds one question to the leader: a page is not held up
// longer than this by a leader that does not answer; it shows no load.
const loadTimeout = 2 * time.Second

// loadRequests numbers the dashboard's state requests.
var loadRequests atomic.Uint64

// GRPCAgentLoads is the AgentLoadSource that asks as `grapnel get state
// agents` does: a CliConnection to dial() (this replica's own gRPC
// address: a follower proxies it to the leader, which answers from its
// memory), a CommanderHello, a CompleteStateRequest for "agents".
func GRPCAgentLoads(dial func() (*grpc.ClientConn, error)) AgentLoadSource {
	return func(ctx context.Context) (map[string]state.AgentStatus, error) {
		cc, err := dial()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if v, ok := viewer(ctx); ok {
			// As for logs: the request has the viewer's rights.
			ctx = metadata.AppendToOutgoingContext(ctx, wire.ForwardedIdentityKey, authz.Encode(v.id), wire.ForwardedCertKey, v.certs)
		}
		st, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
		if err != nil {
			return nil, err
		}
		defer st.CloseSend()
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
			CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
			return nil, err
		}
		id := "dashboard-load-" + strconv.FormatUint(loadRequests.Add(1), 10)
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{
			RequestId: id, RequestContent: &ankbase.Request_CompleteStateRequest{
				CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"agents"}}}}}}); err != nil {
			return nil, err
		}
		for {
			msg, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the server ended the stream before it answered the agents' load")
			}
			if err != nil {
				return nil, err
			}
			resp := msg.GetResponse()
			if resp == nil || resp.GetRequestId() != id {
				continue
			}
			if e := resp.GetError(); e != nil {
				return nil, errors.New("the agents' load request failed: " + e.GetMessage())
			}
			out := map[string]state.AgentStatus{}
			for name, a := range resp.GetCompleteStateResponse().GetCompleteState().GetAgents().GetAgents() {
				var s state.AgentStatus
				if c := a.GetStatus().GetCpuUsage(); c != nil {
					v := c.GetCpuUsage()
					s.CPUUsage = &v
				}
				if f := a.GetStatus().GetFreeMemory(); f != nil {
					v := f.GetFreeMemory()
					s.FreeMemory = &v
				}
				out[name] = s
			}
			return out, nil
		}
	}
}

// loadCache keeps the last answer of the load source.
type loadCache struct {
	mu  sync.Mutex
	at  time.Time
	got map[string]state.AgentStatus
}

// agentLoads is the loads the leader knows, asked at most once per
// LoadRefreshInterval; nil when there is no source or the leader did not
// answer (the page then shows no load, and the error is logged).
func (h *Handler) agentLoads(ctx context.Context) map[string]state.AgentStatus {
	if h.cfg.AgentLoads == nil {
		return nil
	}
	c := &h.loads
	c.mu.Lock()
	defer c.mu.Unlock()
	now := h.cfg.Clock.Now()
	if !c.at.IsZero() && now.Sub(c.at) < LoadRefreshInterval {
		return c.got
	}
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	got, err := h.cfg.AgentLoads(ctx)
	if err != nil {
		h.cfg.Logger.Debug("dashboard: the agents' load is not known", "err", err)
		got = nil
	}
	c.at, c.got = now, got
	return got
}
