package server

import (
	"slices"
	"sync"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// connKind tells which service a stream came in on.
type connKind int

const (
	kindAgent     connKind = iota
	kindCLI                // CliConnection: also receives workload-state broadcasts
	kindCommander          // CommandConnection: receives only its responses
)

// sendQueueLen bounds what may wait for a slow peer before the server
// drops its stream instead of blocking the leader loop.
const sendQueueLen = 1024

// conn is one open stream. The leader loop sends through out; the stream's
// sender goroutine drains it. out holds *grpcapi.FromServer or, for
// broadcasts marshalled once, *rpc.Encoded.
type conn struct {
	name string
	kind connKind
	out  chan any
	// closed is closed when the stream ends or the server drops it.
	closed    chan struct{}
	closeOnce sync.Once
	// saidGoodbye is set by the leader loop (and read only there) when an
	// agent ends its stream with Goodbye: it left on purpose, so no
	// reconnect grace applies.
	saidGoodbye bool
}

func newConn(name string, kind connKind) *conn {
	return &conn{name: name, kind: kind, out: make(chan any, sendQueueLen), closed: make(chan struct{})}
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

func (c *conn) close() { c.closeOnce.Do(func() { close(c.closed) }) }

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
	if c.kind == kindAgent {
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
	if c.kind == kindAgent {
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
		if c.kind == kindCLI {
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
