package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// inMsg is what a stream handler or a service call hands to the leader
// loop, which runs handle: a stream's hello (helloMsg), one message of it
// (streamMsg), its end (goneMsg), or an operator's call (*planCall,
// *resyncCall, *modeCall).
type inMsg interface {
	// handle does what the message asks; it runs on the leader loop only.
	handle(l *leader)
	// event names it as a label of a bounded set (loophold.go).
	event() string
}

// helloMsg opens a stream: an agent's hello, or nil for a CLI or
// commander, which needs nothing until it asks.
type helloMsg struct {
	c     *conn
	agent *grpcapi.AgentHello
}

// streamMsg is one message a stream received.
type streamMsg struct {
	c *conn
	m *grpcapi.ToServer
}

// goneMsg says a stream ended.
type goneMsg struct{ c *conn }

type agentService struct {
	grpcapi.UnimplementedAgentConnectionServer
	s *Server
}

func (a agentService) ConnectAgent(st grpcapi.AgentConnection_ConnectAgentServer) error {
	return a.s.serveStream(st, wire.KindAgent)
}

type cliService struct {
	grpcapi.UnimplementedCliConnectionServer
	s *Server
}

func (c cliService) ConnectCli(st grpcapi.CliConnection_ConnectCliServer) error {
	return c.s.serveStream(st, wire.KindCLI)
}

type commandService struct {
	grpcapi.UnimplementedCommandConnectionServer
	s *Server
}

func (c commandService) ConnectCommand(st grpcapi.CommandConnection_ConnectCommandServer) error {
	return c.s.serveStream(st, wire.KindCommand)
}

type toServerStream = grpc.BidiStreamingServer[grpcapi.ToServer, grpcapi.FromServer]

// serveStream runs one Ankaios stream: the handshake, a sender goroutine,
// and the receive loop that feeds the leader loop. It first finds the
// leader, holding the stream while none is known; a stream this replica
// cannot serve is redirected or proxied (elsewhere).
//
// swdd~communication-to-from-server-middleware~1
// swdd~server-default-communication-grpc~1
func (s *Server) serveStream(st toServerStream, kind wire.Kind) error {
	release, err := s.admitStream(st)
	if err != nil {
		return err
	}
	defer release()
	d, err := s.findLeader(st.Context())
	if err != nil {
		return err
	}
	if d.t == nil {
		return s.elsewhere(st, kind, d)
	}
	t := d.t
	// The header tells a leader-aware client at once that the leader took
	// the stream; a refusal would come as the status instead.
	_ = st.SendHeader(metadata.Pairs(wire.ReplicaIDKey, s.node.ID()))
	first, err := s.recvHello(st, kind)
	if err != nil {
		if errors.Is(err, errs.ErrBadFirstMessage) {
			s.logRefusedStream(st, err)
		}
		return err
	}
	c, hello, err := s.handshake(st, first, kind)
	if err != nil {
		// A refused peer may retry at once and for ever (an upstream
		// Ankaios agent does, every second): its refusal is logged once,
		// then at most once per refusalLogWindow with the count. A
		// refusal for want of a right was logged and counted already
		// (Server.refused).
		if !errors.Is(err, errs.ErrPermissionDenied) {
			s.logRefusedStream(st, err)
		}
		return err
	}
	if c.who.Via != "" {
		// The client's certificate next to the one the stream came with.
		s.log.Info("serving a stream a follower proxied", "kind", kind, "name", c.name, "identity", authz.Who(c.who))
	}
	c.limit = s.cfg.MaxMessageBytes
	if old := s.conns.add(c); old != nil {
		s.log.Warn("a second connection replaces the first", "name", c.name)
		old.close()
	}
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		s.sendLoop(st, c)
	}()
	if !t.post(helloMsg{c: c, agent: hello}) {
		c.close()
	}
	// The receive loop runs apart so that closing the connection (term
	// end, a replacing hello, a full queue) ends the stream at once even
	// when the peer is idle: returning from the handler makes gRPC end the
	// stream, which also ends the pending Recv.
	recvDone := make(chan struct{})
	var sentAll bool
	go func() {
		defer close(recvDone)
		sentAll = s.recvLoop(st, t, c)
	}()
	select {
	case <-recvDone:
		if sentAll && c.kind != wire.KindAgent {
			s.awaitAnswers(c)
		}
	case <-c.closed:
	}
	c.close()
	// Answers queued before the close (the last commits of a term) still
	// go out; a peer that does not read gets drainTimeout, then the
	// handler returns and gRPC cancels the stream, which ends sendLoop.
	drain := clock.NewTimer(s.clock(), drainTimeout)
	select {
	case <-sendDone:
	case <-drain.C:
	}
	drain.Stop()
	if s.conns.remove(c) {
		t.post(goneMsg{c: c})
	}
	if err := c.why(); err != nil {
		return err
	}
	select {
	case <-t.stop:
		// The term ended: tell the peer why, so it looks for the new
		// leader instead of taking a clean end for a goodbye.
		return fmt.Errorf("%w: %s leads no more; reconnect", errs.ErrLeaderChanged, s.node.ID())
	default:
		return nil
	}
}

// logRefusedStream logs a refused stream, once per peer and reason per
// refusalLogWindow.
func (s *Server) logRefusedStream(st toServerStream, err error) {
	host := peerHost(st.Context())
	s.refusals.Log(s.log, slog.LevelWarn, "refused|"+host+"|"+err.Error(), "refused stream", "peer", host, "error", err)
}

func (s *Server) handshake(st toServerStream, first *grpcapi.ToServer, kind wire.Kind) (*conn, *grpcapi.AgentHello, error) {
	if first == nil || first.ToServerEnum == nil {
		return nil, nil, errs.WithText(errs.ErrBadFirstMessage, "Empty")
	}
	who, err := s.guard.Identify(st.Context())
	if err != nil {
		return nil, nil, err
	}
	if kind == wire.KindAgent {
		h := first.GetAgentHello()
		if h == nil {
			return nil, nil, errs.WithText(errs.ErrBadFirstMessage, "No AgentHello received.")
		}
		if err := rpc.CheckProtocolVersion(h.GetProtocolVersion()); err != nil {
			return nil, nil, err
		}
		name := h.GetAgentName()
		if name == "" || !state.ValidName(name) {
			return nil, nil, fmt.Errorf("%w: agent name '%s' must be non-empty and use only [a-zA-Z0-9_-]", state.ErrInvalid, name)
		}
		if err := s.checkAgentName(who, name); err != nil {
			s.refused(who, grpcapi.AgentConnection_ConnectAgent_FullMethodName, err)
			return nil, nil, err
		}
		c := newConn(name, wire.KindAgent)
		c.who = who
		return c, h, nil
	}
	h := first.GetCommanderHello()
	if h == nil {
		return nil, nil, errs.WithText(errs.ErrBadFirstMessage, "No CommanderHello received.")
	}
	if err := rpc.CheckProtocolVersion(h.GetProtocolVersion()); err != nil {
		return nil, nil, err
	}
	prefix := "cli-conn-"
	if kind == wire.KindCommand {
		prefix = "commander-conn-"
	}
	c := newConn(prefix+randomID(), kind)
	c.who = who
	c.owner = s.lockOwner(st.Context())
	c.keyed = s.keyedOwners()
	return c, nil, nil
}

func (s *Server) sendLoop(st toServerStream, c *conn) {
	for {
		select {
		case m := <-c.out:
			if err := s.sendOut(st, c, m); err != nil {
				c.close()
				return
			}
		case <-c.closed:
			s.drain(st, c)
			return
		case <-st.Context().Done():
			c.close()
			return
		}
	}
}

// sendOut sends one queued message. It is marshalled here, in the
// stream's goroutine, and the size checked before gRPC sees it: gRPC
// would end the stream on a message over the limit, with a status the
// peer cannot act on. One that is too large is cut or answered with an
// error (fit); one that cannot be sent at all ends the stream with the
// reason, without what is queued behind it (an agent refused its hello
// must not act on the updates that follow it).
func (s *Server) sendOut(st toServerStream, c *conn, m any) error {
	e, ok := m.(*rpc.Encoded)
	if !ok {
		fm := m.(*grpcapi.FromServer)
		var err error
		if e, err = rpc.Encode(fm); err != nil {
			return err
		}
		if e.Len() > c.limit {
			parts, err := fit(fm, e.Len(), c.limit, c.name)
			if err != nil {
				s.tooLarge(c, err)
				return err
			}
			s.refusals.Log(s.log, slog.LevelWarn, "cut|"+c.name, "a message over the size limit was cut or answered with an error",
				"peer", c.name, "bytes", e.Len(), "limit", c.limit, "messages", len(parts))
			for _, p := range parts {
				if err := st.SendMsg(p); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if e.Len() > c.limit {
		// Broadcasts are cut before they are marshalled once for many
		// streams (sendBroadcasts); this one slipped through.
		err := fmt.Errorf("%w: a message of %d bytes for %s, more than the message limit of %d bytes", errs.ErrMessageTooLarge, e.Len(), c.name, c.limit)
		s.tooLarge(c, err)
		return err
	}
	return st.SendMsg(e)
}

// tooLarge ends a stream whose next message cannot be sent, saying why.
func (s *Server) tooLarge(c *conn, err error) {
	s.refusals.Log(s.log, slog.LevelError, "too large|"+c.name, "a message too large to send ends the stream", "peer", c.name, "error", err)
	c.closeWith(err)
}

// drainTimeout bounds how long a closing stream keeps sending what was
// queued before the close.
const drainTimeout = time.Second

// drain sends what is already queued on a closed connection.
func (s *Server) drain(st toServerStream, c *conn) {
	for {
		select {
		case m := <-c.out:
			if s.sendOut(st, c, m) != nil {
				return
			}
		default:
			return
		}
	}
}

// recvLoop forwards everything the peer sends, prefixing request ids with
// the connection name so that answers find their way back. It reports
// whether the peer ended its side cleanly (a half-close, or a CLI's
// Goodbye) rather than going away.
func (s *Server) recvLoop(st toServerStream, t *term, c *conn) (sentAll bool) {
	for {
		m, err := st.Recv()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		select {
		case <-c.closed:
			return false
		default:
		}
		if req := m.GetRequest(); req != nil {
			if c.kind != wire.KindAgent {
				c.asked(req.GetRequestId())
			}
			req.RequestId = rpc.PrefixRequestID(c.name, req.GetRequestId())
		}
		if !t.post(streamMsg{c: c, m: m}) {
			return false
		}
		if m.GetGoodbye() != nil && c.kind != wire.KindAgent {
			return true
		}
	}
}

// answerTimeout bounds how long a stream whose peer has sent all it will
// send stays open for the answers still due: a request waits for a
// commit, which a term end cuts short anyway (it closes the connection).
const answerTimeout = 30 * time.Second

// awaitAnswers keeps a CLI or commander stream open after its peer's
// half-close until every request it sent is answered, the connection is
// closed, or answerTimeout passes.
func (s *Server) awaitAnswers(c *conn) {
	wait := clock.NewTimer(s.clock(), answerTimeout)
	defer wait.Stop()
	select {
	case <-c.awaitAnswers():
	case <-c.closed:
	case <-wait.C:
		s.log.Warn("a stream closed by its peer ends with requests unanswered", "peer", c.name, "after", answerTimeout)
	}
}

// post hands a message to the term's leader loop; false once the term
// has ended.
func (t *term) post(m inMsg) bool {
	select {
	case t.inbox <- m:
		return true
	case <-t.stop:
		return false
	}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
