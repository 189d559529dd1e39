package server

import (
	"fmt"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// sendQueueLen bounds what may wait for a slow peer before the server
// drops its stream instead of blocking the leader loop.
const sendQueueLen = 1024

// conn is one open stream. The leader loop sends through out; the stream's
// sender goroutine drains it. out holds *grpcapi.FromServer or, for
// broadcasts marshalled once, *rpc.Encoded.
type conn struct {
	name string
	kind wire.Kind
	// who is the peer's identity (identity.Insecure without TLS): the
	// history names a CLI's or commander's requests by its name, and each
	// message is checked against its role (leader.permitted).
	who identity.Identity
	// owner is the CLI's or commander's lock owner (see lockOwner); empty
	// for agents: a workload's update through the control interface
	// holds no lock.
	owner string
	// keyed: the cluster version named lock owners and requesters by
	// role and name when the stream opened (state.Store.KeyedOwners).
	keyed bool
	out   chan any
	// limit is the largest message the stream sends (see fit).
	limit int
	// closed is closed when the stream ends or the server drops it.
	closed    chan struct{}
	closeOnce sync.Once
	// reason says why the server ended the stream, for its status; set
	// before closed is closed, read after.
	reason error
	// saidGoodbye is set by the leader loop (and read only there) when an
	// agent ends its stream with Goodbye: it stopped on purpose, so its
	// workloads are unobserved at once; it still gets the reconnect grace,
	// as a restart is the usual reason to stop (agentGone).
	saidGoodbye bool

	// The requests of a CLI or commander stream not answered yet, so that
	// a peer that half-closes its side still gets every answer (see
	// awaitAnswers).
	pendingMu  sync.Mutex
	unanswered map[string]int // by the peer's request id; no entry at 0
	halfClosed bool
	settled    chan struct{} // closed once halfClosed and nothing is unanswered
}

func newConn(name string, kind wire.Kind) *conn {
	return &conn{name: name, kind: kind, out: make(chan any, sendQueueLen), limit: rpc.MaxMessageBytes,
		closed: make(chan struct{}), unanswered: map[string]int{}, settled: make(chan struct{})}
}

// asked notes a request the peer sent (its own id, before the prefix).
func (c *conn) asked(id string) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	c.unanswered[id]++
}

// answered notes a response queued for the request id; the later
// responses of a subscription find nothing to count.
func (c *conn) answered(id string) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	n := c.unanswered[id]
	if n == 0 {
		return
	}
	if n == 1 {
		delete(c.unanswered, id)
	} else {
		c.unanswered[id] = n - 1
	}
	if c.halfClosed && len(c.unanswered) == 0 {
		close(c.settled)
	}
}

// awaitAnswers is called once the peer has sent all it will send; the
// channel it returns is closed when every request it sent has had its
// first answer. gRPC lets a server keep sending after the client's
// half-close, and a scripted client (a pipe into grpcurl) reads the
// answers only then.
func (c *conn) awaitAnswers() <-chan struct{} {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	if !c.halfClosed {
		c.halfClosed = true
		if len(c.unanswered) == 0 {
			close(c.settled)
		}
	}
	return c.settled
}

// send queues a message; a full queue means a stuck peer, which is
// disconnected so that it reconnects and resynchronises.
func (c *conn) send(m *grpcapi.FromServer) bool { return c.enqueue(m) }

// sendEncoded queues a message marshalled once for many streams.
func (c *conn) sendEncoded(e *rpc.Encoded) bool { return c.enqueue(e) }

func (c *conn) enqueue(m any) bool {
	select {
	case <-c.closed:
		return false
	default:
	}
	select {
	case c.out <- m:
		return true
	default:
		c.close()
		return false
	}
}

func (c *conn) close() { c.closeWith(nil) }

// closeWith closes the connection with the reason the stream's status
// gives the peer; the first close decides.
func (c *conn) closeWith(reason error) {
	c.closeOnce.Do(func() {
		c.reason = reason
		close(c.closed)
	})
}

// why is the reason the connection was closed with; call it only after
// closed is closed.
func (c *conn) why() error { return c.reason }

// Bounds for cutting a message (fit): what the FromServer around a run of
// items and one item's field tag and length may add to their sizes.
const (
	fitMsgOverhead  = 64
	fitItemOverhead = 8
)

// fit turns a message of n encoded bytes, more than limit, into messages
// that fit; gRPC would refuse to send it and end the stream, and the peer
// would meet the same message after every reconnect. The oldest states
// written before the state budget (state.Limits) are the ones that can be
// too large.
//
//   - A response becomes the Ankaios error response with the same request
//     id, naming the size, the limit and what to ask instead.
//   - A workload-state broadcast is cut into several: states stand alone.
//   - An UpdateWorkload is cut into several, the deletions first: an agent
//     handles one that way too, deleted before added, so the result is
//     the same.
//   - A ServerHello cannot be cut: an agent deletes every workload its
//     hello does not list, so a partial one would stop running workloads.
//     The error refuses the stream instead; the agent keeps its workloads
//     running as they are and tries again later.
//
// The error names what could not be sent and why.
func fit(m *grpcapi.FromServer, n, limit int, peer string) ([]*grpcapi.FromServer, error) {
	switch v := m.GetFromServerEnum().(type) {
	case *grpcapi.FromServer_Response:
		r := v.Response
		_, cs := r.GetResponseContent().(*ankbase.Response_CompleteStateResponse)
		err := answerTooLarge(cs, n, limit)
		return []*grpcapi.FromServer{{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{
			RequestId: r.GetRequestId(), ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: err.Error()}}}}}}, nil
	case *grpcapi.FromServer_UpdateWorkloadState:
		runs, ok := chunk(v.UpdateWorkloadState.GetWorkloadStates(), limit)
		if !ok {
			break
		}
		out := make([]*grpcapi.FromServer, 0, len(runs))
		for _, r := range runs {
			out = append(out, &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
				UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: r}}})
		}
		return checkFit(out, limit)
	case *grpcapi.FromServer_UpdateWorkload:
		dels, ok1 := chunk(v.UpdateWorkload.GetDeletedWorkloads(), limit)
		adds, ok2 := chunk(v.UpdateWorkload.GetAddedWorkloads(), limit)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: an UpdateWorkload of %d bytes for %s holds a workload that alone exceeds the message limit of %d bytes; "+
				"shrink that workload", errs.ErrMessageTooLarge, n, peer, limit)
		}
		var out []*grpcapi.FromServer
		for _, d := range dels {
			out = append(out, &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{
				UpdateWorkload: &grpcapi.UpdateWorkload{DeletedWorkloads: d}}})
		}
		for _, a := range adds {
			out = append(out, &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{
				UpdateWorkload: &grpcapi.UpdateWorkload{AddedWorkloads: a}}})
		}
		return checkFit(out, limit)
	case *grpcapi.FromServer_ServerHello:
		return nil, fmt.Errorf("%w: the ServerHello for agent %s is %d bytes with %d workloads, more than the message limit of %d bytes; "+
			"move or shrink workloads of that agent", errs.ErrMessageTooLarge, peer, n, len(v.ServerHello.GetAddedWorkloads()), limit)
	}
	return nil, fmt.Errorf("%w: a message of %d bytes for %s, more than the message limit of %d bytes", errs.ErrMessageTooLarge, n, peer, limit)
}

// chunk cuts items into runs that fit into a message of limit bytes each;
// false when an item alone does not.
func chunk[T proto.Message](items []T, limit int) ([][]T, bool) {
	budget := limit - fitMsgOverhead
	var (
		out  [][]T
		cur  []T
		size int
	)
	for _, it := range items {
		n := proto.Size(it) + fitItemOverhead
		if n > budget {
			return nil, false
		}
		if size+n > budget {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, it)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, true
}

// checkFit makes sure that the cut messages do fit.
func checkFit(ms []*grpcapi.FromServer, limit int) ([]*grpcapi.FromServer, error) {
	for _, m := range ms {
		if n := proto.Size(m); n > limit {
			return nil, fmt.Errorf("%w: a part of %d bytes, more than the message limit of %d bytes", errs.ErrMessageTooLarge, n, limit)
		}
	}
	return ms, nil
}

// answerTooLarge says that an answer of n bytes exceeds the message
// limit, and what to ask instead: a complete state (the answer to a get,
// or an event) can be read in parts.
func answerTooLarge(completeState bool, n, limit int) error {
	if completeState {
		return fmt.Errorf("%w: the complete state answer is %d bytes, more than the message limit of %d bytes; "+
			"request a narrower field mask, e.g. desiredState.workloads.<name>, desiredState.configs.<name>, "+
			"workloadStates.<agent> or agents, and read the state in parts", errs.ErrMessageTooLarge, n, limit)
	}
	return fmt.Errorf("%w: the answer is %d bytes, more than the message limit of %d bytes; nothing of it was sent",
		errs.ErrMessageTooLarge, n, limit)
}

// registry holds the open streams by name.
type registry struct {
	// mu guards agents and clis.
	mu     sync.Mutex
	agents map[string]*conn
	clis   map[string]*conn
}

func newRegistry() *registry {
	return &registry{agents: map[string]*conn{}, clis: map[string]*conn{}}
}

// add registers c, returning the connection it replaces, if any.
func (r *registry) add(c *conn) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.clis
	if c.kind == wire.KindAgent {
		m = r.agents
	}
	old := m[c.name]
	m[c.name] = c
	return old
}

// remove unregisters c if it is still the registered one.
func (r *registry) remove(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.clis
	if c.kind == wire.KindAgent {
		m = r.agents
	}
	if m[c.name] == c {
		delete(m, c.name)
		return true
	}
	return false
}

func (r *registry) agent(name string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[name]
}

func (r *registry) byName(name string) *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clis[name]; ok {
		return c
	}
	return r.agents[name]
}

// broadcastTargets lists the agent and CLI streams that receive
// workload-state broadcasts, except the one named.
func (r *registry) broadcastTargets(except string) []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*conn
	for n, c := range r.agents {
		if n != except {
			out = append(out, c)
		}
	}
	for _, c := range r.clis {
		if c.kind == wire.KindCLI {
			out = append(out, c)
		}
	}
	return out
}

func (r *registry) allAgents() []*conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*conn, 0, len(r.agents))
	for _, c := range r.agents {
		out = append(out, c)
	}
	return out
}

// agentNames lists the agents with an open stream, sorted.
func (r *registry) agentNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.agents))
	for n := range r.agents {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// closeAll drops every stream, so that clients reconnect to the leader.
func (r *registry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.agents {
		c.close()
	}
	for _, c := range r.clis {
		c.close()
	}
}
