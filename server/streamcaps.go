package server

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// StreamLimits bound the Ankaios streams (ConnectAgent, ConnectCli,
// ConnectCommand) one replica holds at once, whatever it does with them:
// serve them as leader, hold them while no leader is known, or proxy
// them to the leader. Each costs two goroutines and a send queue of 1024
// messages; before these caps an audit held 5,000 agent streams and
// 2,500 CLI streams open on one leader (issue 27, hole 7). A stream a
// follower proxied counts on the leader under the identity the follower
// forwarded, that of the client.
type StreamLimits struct {
	// PerAgent caps the streams of one agent identity. An agent needs
	// one; when it reconnects its new stream replaces the old, which ends
	// a moment later, so two for a moment.
	PerAgent int
	// PerClient caps the streams of one identity of another role
	// (commander, operator): a tool, a dashboard page following logs, a
	// bench's clients sharing one certificate.
	PerClient int
	// Total caps the streams of every identity together.
	Total int
}

// DefaultStreamLimits are the caps grapnel-server starts with.
var DefaultStreamLimits = StreamLimits{PerAgent: 4, PerClient: 128, Total: 512}

// DefaultHelloTimeout is how long a new Ankaios stream may take to send
// its first message, the hello; a stream that says nothing held its
// goroutines for ever before (issue 27, hole 7). A client sends its hello
// right after opening the stream.
const DefaultHelloTimeout = 10 * time.Second

// The reasons a stream is refused, as metric labels.
const (
	refusedIdentityCap = "identity_cap"
	refusedTotalCap    = "total_cap"
	refusedNoHello     = "no_hello"
)

// streamCounter counts the open streams per identity and in total.
// Without TLS no identity is known: only the total applies.
type streamCounter struct {
	lim StreamLimits

	mu    sync.Mutex // guards byID and total
	byID  map[string]int
	total int
}

func newStreamCounter(lim StreamLimits) *streamCounter {
	return &streamCounter{lim: lim, byID: map[string]int{}}
}

// admit counts a stream of id; it returns the function that uncounts it,
// or a refusal (errs.ErrTooManyStreams) and its reason.
func (c *streamCounter) admit(id identity.Identity) (release func(), reason string, err error) {
	key, capID := "", 0
	if !id.IsInsecure() {
		key, capID = id.Role.String()+"/"+id.Name, c.lim.PerClient
		if id.Role == identity.Agent {
			capID = c.lim.PerAgent
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case key != "" && capID > 0 && c.byID[key] >= capID:
		return nil, refusedIdentityCap, fmt.Errorf("%w: %s holds %d Ankaios streams on this replica, the most one %s identity may (--max-streams-per-%s)",
			errs.ErrTooManyStreams, authz.Who(id), c.byID[key], id.Role, flagRole(id.Role))
	case c.lim.Total > 0 && c.total >= c.lim.Total:
		return nil, refusedTotalCap, fmt.Errorf("%w: this replica holds %d Ankaios streams, its cap (--max-streams); %s may try again later",
			errs.ErrTooManyStreams, c.total, authz.Who(id))
	}
	c.total++
	if key != "" {
		c.byID[key]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if key == "" {
				return
			}
			if n := c.byID[key] - 1; n > 0 {
				c.byID[key] = n
			} else {
				delete(c.byID, key)
			}
		})
	}, "", nil
}

// open is the number of streams counted now, in all and of one identity.
func (c *streamCounter) open(id identity.Identity) (total, ofID int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.byID[id.Role.String()+"/"+id.Name]
}

func flagRole(r identity.Role) string {
	if r == identity.Agent {
		return "agent"
	}
	return "client"
}

// admitStream counts a new stream of the caller in st's context against
// the caps; a refusal is logged (rate-limited), counted and returned.
func (s *Server) admitStream(st toServerStream) (func(), error) {
	id, err := s.guard.Identify(st.Context())
	if err != nil {
		return nil, err
	}
	release, reason, err := s.streams.admit(id)
	if err != nil {
		who := authz.Who(id)
		s.refusals.Log(s.log, slog.LevelWarn, "streams|"+reason+"|"+who, "stream refused: over the cap", "identity", who, "error", err)
		s.cfg.Metrics.RefusedStream(reason, roleLabel(id))
		return nil, err
	}
	return release, nil
}

// recvHello waits for the first message of a stream for at most the
// hello timeout. On a timeout the stream's handler returns, which makes
// gRPC end the stream and with it the Recv still waiting in the
// goroutine.
func (s *Server) recvHello(st toServerStream, kind wire.Kind) (*grpcapi.ToServer, error) {
	got := make(chan firstMsg, 1)
	go func() {
		m, err := st.Recv()
		got <- firstMsg{m, err}
	}()
	wait := clock.NewTimer(s.clock(), s.helloTimeout())
	defer wait.Stop()
	select {
	case h := <-got:
		return h.m, h.err
	case <-wait.C:
		id, _ := s.guard.Identify(st.Context())
		s.cfg.Metrics.RefusedStream(refusedNoHello, roleLabel(id))
		return nil, fmt.Errorf("%w: no %s within %v (--hello-timeout)", errs.ErrBadFirstMessage, helloName(kind), s.helloTimeout())
	}
}

// firstMsg is the first message of a stream, or the error receiving it.
type firstMsg struct {
	m   *grpcapi.ToServer
	err error
}

func (s *Server) helloTimeout() time.Duration {
	if s.cfg.HelloTimeout > 0 {
		return s.cfg.HelloTimeout
	}
	return DefaultHelloTimeout
}

func helloName(kind wire.Kind) string {
	if kind == wire.KindAgent {
		return "AgentHello"
	}
	return "CommanderHello"
}

// roleLabel is an identity's role as a metric label ("none" without TLS).
func roleLabel(id identity.Identity) string {
	if id.IsInsecure() {
		return "none"
	}
	return id.Role.String()
}
