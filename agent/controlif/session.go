package controlif

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/grapnel-io/grapnel/access"
	"github.com/grapnel-io/grapnel/internal/ratelog"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
	"github.com/grapnel-io/grapnel/state"
)

// Reasons of ConnectionClosed, as Ankaios words them.
const (
	reasonHelloMissing = "Initial Hello missing!"
	reasonDecode       = "Could not decode protobuf data"
	accessDenied       = "Access denied"
)

// queueLen is how many messages may wait for a workload that reads slowly,
// as many as Ankaios buffers per control interface.
const queueLen = 1024

// phase is where a connection stands.
type phase int

const (
	awaitingHello phase = iota
	accepted
	// closed: ConnectionClosed was sent; the workload's messages are
	// dropped until a new connection starts with a Hello, or the
	// workload closes `output` (the next writer must say Hello first).
	closed
)

// session serves one instance: a goroutine reading `output` and one
// writing `input`, both owned by the session and ended by stop.
type session struct {
	inst   state.InstanceName
	access state.ControlInterfaceAccess
	auth   *access.Rules
	prefix string // "<workload name>@"
	seq    uint64 // opening order, to route to the newest instance of a name

	forward func(*ankbase.Request) error
	log     *slog.Logger
	// logs follows the workload's log campaigns; gate is held (read)
	// from admitting a LogsRequest until it is forwarded, so that
	// ServerGone, which takes it, never forgets a campaign forwarded on
	// the next stream.
	logs     *logBook
	gate     *sync.RWMutex
	refusals *ratelog.Limiter
	refused  *atomic.Uint64

	in    *fifoReader
	out   *fifoWriter
	queue chan *controlapi.FromAnkaios
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// start runs the session's goroutines.
//
// swdd~agent-create-control-interface-pipes-per-workload~2
func (s *session) start() {
	s.wg.Add(2)
	go s.readLoop()
	go s.writeLoop()
}

// stop ends both goroutines and waits for them; the FIFOs stay.
func (s *session) stop() {
	s.once.Do(func() {
		close(s.quit)
		_ = s.in.Close()
		s.out.stop()
	})
	s.wg.Wait()
}

// readLoop reads the workload's messages until the session stops.
//
// swdd~agent-listens-for-requests-from-pipe~1
func (s *session) readLoop() {
	defer s.wg.Done()
	br := bufio.NewReader(s.in)
	ph := awaitingHello
	for {
		msg, err := readFrame(br)
		switch {
		case err == nil, errors.Is(err, errFrame):
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			// The workload closed `output`; a partial frame is lost.
			if ph == closed {
				ph = awaitingHello
			}
			if ph == accepted && s.logs.size() > 0 && s.workloadGone() {
				s.endLogs("the workload closed its control interface")
			}
			continue
		default:
			s.stoppedOr(err)
			return
		}
		switch ph {
		case awaitingHello:
			ph = s.handshake(msg, err)
		case accepted:
			ph = s.serve(msg, err)
		case closed:
			if msg.GetHello() != nil {
				ph = s.handshake(msg, nil)
			}
		}
	}
}

// stoppedOr logs a read error unless the session was stopped.
func (s *session) stoppedOr(err error) {
	select {
	case <-s.quit:
	default:
		s.log.Warn("control interface: reading output failed", "instance", s.inst.String(), "err", err)
	}
}

// handshake checks the first message of a connection.
//
// swdd~agent-closes-control-interface-on-missing-initial-hello~1
// swdd~control-interface-accepted-message-on-initial-hello~1
func (s *session) handshake(msg *controlapi.ToAnkaios, err error) phase {
	reason := ""
	switch {
	case err != nil:
		s.log.Debug("control interface: undecodable first message", "instance", s.inst.String(), "err", err)
		reason = reasonDecode
	case msg.GetHello() == nil:
		reason = reasonHelloMissing
	default:
		reason = versionProblem(msg.GetHello().GetProtocolVersion())
	}
	if reason != "" {
		s.log.Warn("control interface: connection refused", "instance", s.inst.String(), "reason", reason)
		s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_ConnectionClosed{
			ConnectionClosed: &controlapi.ConnectionClosed{Reason: reason}}})
		return closed
	}
	s.log.Info("control interface: connection established", "instance", s.inst.String())
	s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_ControlInterfaceAccepted{
		ControlInterfaceAccepted: &controlapi.ControlInterfaceAccepted{}}})
	return accepted
}

// versionProblem is "" for a compatible protocol version, otherwise the
// reason Ankaios gives, also for a version that does not parse.
func versionProblem(v string) string {
	if rpc.CheckProtocolVersion(v) == nil {
		return ""
	}
	major, _, _ := strings.Cut(rpc.ProtocolVersion, ".")
	return fmt.Sprintf("Unsupported protocol version '%s'. Currently supported '%s'", v, major)
}

// serve handles a message of an accepted connection. Undecodable messages
// are skipped; a repeated Hello is checked for its version and answered.
func (s *session) serve(msg *controlapi.ToAnkaios, err error) phase {
	if err != nil {
		s.log.Warn("control interface: skipping undecodable message", "instance", s.inst.String(), "err", err)
		return accepted
	}
	switch x := msg.GetToAnkaiosEnum().(type) {
	case *controlapi.ToAnkaios_Request:
		s.request(x.Request)
	case *controlapi.ToAnkaios_Hello:
		v := x.Hello.GetProtocolVersion()
		s.log.Info("control interface: another Hello", "instance", s.inst.String(), "protocolVersion", v)
		// A new connection: the campaigns of the one before have nobody
		// to read them.
		s.endLogs("the workload said Hello again")
		if reason := versionProblem(v); reason != "" {
			s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_ConnectionClosed{
				ConnectionClosed: &controlapi.ConnectionClosed{Reason: reason}}})
			return closed
		}
		// A workload restarted by its restart policy keeps the session
		// but starts over with a Hello and waits for the answer, so a
		// compatible Hello is always accepted (upstream answers only the
		// first and would leave such a workload waiting).
		s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_ControlInterfaceAccepted{
			ControlInterfaceAccepted: &controlapi.ControlInterfaceAccepted{}}})
	default:
		s.log.Warn("control interface: empty ToAnkaios message", "instance", s.inst.String())
	}
	return accepted
}

// request authorizes a request and forwards it with the workload prefix,
// or answers it with an error.
//
// swdd~agent-converts-control-interface-message-to-ankaios-object~1
// swdd~agent-checks-request-for-authorization~1
// swdd~agent-responses-to-denied-request-from-control-interface~1
// swdd~agent-responses-to-denied-request-from-control-interface-contains-request-id~1
// swdd~agent-forward-request-from-control-interface-pipe-to-server~2
// swdd~agent-adds-workload-prefix-id-control-interface-request~1
func (s *session) request(req *ankbase.Request) {
	if req == nil {
		req = &ankbase.Request{}
	}
	if err := s.auth.Authorize(req); err != nil {
		s.log.Info("control interface: request denied", "instance", s.inst.String(), "requestId", req.GetRequestId(), "reason", err)
		s.answerError(req.GetRequestId(), accessDenied)
		return
	}
	id := req.GetRequestId()
	switch req.GetRequestContent().(type) {
	case *ankbase.Request_LogsRequest:
		s.gate.RLock()
		defer s.gate.RUnlock()
		if n, ok := s.logs.admit(id); !ok {
			s.refused.Add(1)
			s.refusals.Log(s.log, slog.LevelWarn, "logs|"+s.inst.String(), "control interface: log campaign refused over the workload's cap",
				"instance", s.inst.String(), "requestId", id, "open", n, "max", s.logs.max)
			s.answerError(id, fmt.Sprintf("Log campaign refused: workload '%s' has %d log campaigns open, as many as the agent allows a workload (--max-log-campaigns-per-workload %d); cancel one or wait for one to end",
				s.inst.WorkloadName, n, s.logs.max))
			return
		}
	case *ankbase.Request_LogsCancelRequest:
		s.logs.forget(id)
	}
	fwd := &ankbase.Request{RequestId: s.prefix + id, RequestContent: req.GetRequestContent()}
	err := ErrNotConnected
	if s.forward != nil {
		err = s.forward(fwd)
	}
	if err != nil {
		if req.GetLogsRequest() != nil {
			s.logs.forget(id)
		}
		s.log.Warn("control interface: cannot forward request", "instance", s.inst.String(), "requestId", id, "err", err)
		s.answerError(id, fmt.Sprintf("The server is not reachable: %v", err))
	}
}

// endLogs cancels every log campaign the workload has open: the server
// ends the campaign and tells the agents to close its readers. The
// answers to these cancels are the agent's, not the workload's.
func (s *session) endLogs(why string) {
	ids := s.logs.cancelAll()
	if len(ids) == 0 {
		return
	}
	s.log.Info("control interface: cancelling the workload's log campaigns", "instance", s.inst.String(), "campaigns", len(ids), "why", why)
	for _, id := range ids {
		s.forwardCancel(id)
	}
}

// forwardCancel sends the server a LogsCancelRequest for a campaign the
// logBook marked as cancelled by the agent.
func (s *session) forwardCancel(id string) {
	err := ErrNotConnected
	if s.forward != nil {
		err = s.forward(&ankbase.Request{RequestId: s.prefix + id,
			RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
	}
	if err != nil {
		// Not connected: the server ended the campaign with the stream.
		s.logs.uncancel(id)
		s.log.Debug("control interface: cannot cancel a log campaign", "instance", s.inst.String(), "requestId", id, "err", err)
	}
}

// workloadGone reports whether nobody reads `input` once the workload
// closed `output`: it probes as a write does, the same number of times
// and as far apart, so that a workload that reopens its FIFOs keeps its
// campaigns.
func (s *session) workloadGone() bool {
	for attempt := 0; ; attempt++ {
		if s.out.hasReader() {
			return false
		}
		if attempt >= s.out.t.retries {
			return true
		}
		if !s.out.sleep(s.out.t.retryEvery) {
			return false
		}
	}
}

// deliver passes an answer from the server (id without the prefix) to
// the workload, unless it concerns a log campaign the agent cancelled.
func (s *session) deliver(r *ankbase.Response) {
	if !s.logs.answer(r.GetRequestId(), r) {
		return
	}
	s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_Response{Response: r}})
}

// serverGone tells the workload that its log campaigns ended with the
// agent's stream: a LogsStopResponse for each instance it still waits
// for, an error for a request not yet accepted.
func (s *session) serverGone() {
	for _, e := range s.logs.serverGone() {
		if !e.accepted {
			s.answerError(e.id, "The log campaign ended: the agent lost its connection to the server")
			continue
		}
		for _, inst := range e.pending {
			s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_Response{Response: &ankbase.Response{
				RequestId: e.id,
				ResponseContent: &ankbase.Response_LogsStopResponse{LogsStopResponse: &ankbase.LogsStopResponse{
					WorkloadName: rpc.InstanceNameToProto(inst)}},
			}}})
		}
	}
}

func (s *session) answerError(id, message string) {
	s.send(&controlapi.FromAnkaios{FromAnkaiosEnum: &controlapi.FromAnkaios_Response{Response: &ankbase.Response{
		RequestId:       id,
		ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: message}},
	}}})
}

// send queues a message for the workload; false when the queue is full
// (the message is dropped) or the session stopped.
func (s *session) send(m *controlapi.FromAnkaios) bool {
	select {
	case <-s.quit:
		return false
	default:
	}
	select {
	case s.queue <- m:
		return true
	default:
		s.log.Warn("control interface: workload reads too slowly, dropping a message", "instance", s.inst.String())
		return false
	}
}

// writeLoop writes queued messages to `input`.
//
// swdd~agent-ensures-control-interface-input-pipe-read~1
// swdd~agent-forward-responses-to-control-interface-pipe~1
func (s *session) writeLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.quit:
			return
		case m := <-s.queue:
			s.write(m)
		}
	}
}

func (s *session) write(m *controlapi.FromAnkaios) {
	b, err := encodeFrame(m)
	if err != nil {
		s.log.Error("control interface: cannot encode a message", "instance", s.inst.String(), "err", err)
		return
	}
	err = s.out.write(b)
	switch {
	case err == nil, errors.Is(err, errStopped):
	case errors.Is(err, errReceiverGone):
		s.log.Info("control interface: the workload does not read its input", "instance", s.inst.String(), "err", err)
		s.receiverGone(m.GetResponse())
	default:
		s.log.Warn("control interface: writing input failed", "instance", s.inst.String(), "err", err)
	}
}

// receiverGone cancels the log campaign whose entries the workload did not
// take; other answers are just lost, and the interface stays for the
// workload to recover.
//
// swdd~agent-handles-control-interface-workload-gone~1
func (s *session) receiverGone(resp *ankbase.Response) {
	if resp.GetLogEntriesResponse() == nil {
		return
	}
	s.logs.cancel(resp.GetRequestId())
	s.forwardCancel(resp.GetRequestId())
}
