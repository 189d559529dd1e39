package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Conn is what the commands need of a server connection; *client.Conn
// implements it.
type Conn interface {
	// Request sends a request and returns its answer; a Response{error}
	// comes back as an error carrying the server's message.
	Request(ctx context.Context, req *ankbase.Request) (*ankbase.Response, error)
	// Subscribe sends a request and delivers every response with its id.
	Subscribe(ctx context.Context, req *ankbase.Request) (<-chan *ankbase.Response, func(), error)
	// WorkloadStates delivers the server's workload-state broadcasts from
	// the first call on.
	WorkloadStates() <-chan []*ankbase.WorkloadState
	// Err says why the connection ended, nil while it is up.
	Err() error
}

// ErrConnectionEnded is returned when the stream ends while a command
// still needs it and the connection has no better reason to give.
var ErrConnectionEnded = errors.New("connection to the server ended")

// Session runs commands over one connection and writes their output.
type Session struct {
	Conn Conn
	In   io.Reader
	Out  io.Writer
	Err  io.Writer
	// Terminal says stdout is a terminal: live tables are redrawn in
	// place. Otherwise they are printed as plain lines.
	Terminal bool
	// Width is the terminal width tables are fitted to; 0 means no limit.
	Width int
	// NoWait skips waiting for workloads after an update.
	NoWait bool
	// Quiet suppresses progress messages and live tables (not the data a
	// command was asked for); Verbose adds debug lines on Err.
	Quiet, Verbose bool
	// Timeout bounds the wait for the first answer of a subscription.
	Timeout time.Duration
	// Now stamps events; nil means Clock.Now.
	Now func() time.Time
	// Tick is the spinner period of live tables; 0 means 100ms.
	Tick time.Duration
	// Clock drives the response timeouts and the spinner; nil is the
	// system clock.
	Clock clock.Clock
	// Plan reaches Grapnel's Plan service, for dry-runs and updates at an
	// expected sequence number; nil when the connection has none.
	Plan grapnelpb.PlanClient
	// Cluster reaches Grapnel's Cluster service, for the agents' modes in
	// `get agents`; nil when the connection has none.
	Cluster grapnelpb.ClusterClient
	// DryRun makes apply, set state and delete print the plan of their
	// update, in PlanOutput (table, yaml or json), instead of making it.
	DryRun     bool
	PlanOutput string
	// ExpectSeq (--plan-revision), when set, makes apply, set state and
	// delete update only if the desired state is still at that revision
	// (the one a plan names; the Plan service calls it seq).
	ExpectSeq *uint64
	// ExpectRevision, when set, makes every update command update only if
	// the objects it addresses are unchanged since that revision (the one
	// `get state` prints); it goes through the Plan service.
	ExpectRevision *uint64
	// Locks reaches Grapnel's Locks service; nil when the connection has
	// none.
	Locks grapnelpb.LocksClient
	// Reconnect opens a new connection to the leader after Conn's stream
	// ended; the streaming commands (get workloads --watch, get events,
	// logs -f) then resume on it (resume.go). Nil: they end with the
	// stream.
	Reconnect func(ctx context.Context) (Conn, error)
	// planHint is the command that applies the plan of the command
	// running, given the plan's seq.
	planHint func(seq uint64) string
}

// clock is Clock, or the system clock.
func (s *Session) clock() clock.Clock {
	if s.Clock != nil {
		return s.Clock
	}
	return clock.Real()
}

func (s *Session) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return s.clock().Now()
}

func (s *Session) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 3 * time.Second
}

func (s *Session) tick() time.Duration {
	if s.Tick > 0 {
		return s.Tick
	}
	return 100 * time.Millisecond
}

// infof prints a progress message unless quiet.
func (s *Session) infof(format string, args ...any) {
	if !s.Quiet {
		fmt.Fprintf(s.Out, format+"\n", args...)
	}
}

// debugf prints a debug line on stderr when verbose; stdout stays clean
// for YAML and JSON.
func (s *Session) debugf(format string, args ...any) {
	if s.Verbose && !s.Quiet {
		fmt.Fprintf(s.Err, "debug: "+format+"\n", args...)
	}
}

// warnf prints a warning on stderr.
func (s *Session) warnf(format string, args ...any) {
	fmt.Fprintf(s.Err, "warning: "+format+"\n", args...)
}

// connErr explains why a stream ended under a command.
func (s *Session) connErr() error {
	if err := s.Conn.Err(); err != nil {
		return err
	}
	return ErrConnectionEnded
}

// CompleteState reads the complete state, or the parts the masks select,
// as a Tree.
func (s *Session) CompleteState(ctx context.Context, masks []string) (state.Tree, error) {
	s.debugf("requesting the complete state with masks %q", masks)
	resp, err := s.Conn.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks},
	}})
	if err != nil {
		return nil, err
	}
	return rpc.CompleteStateToTree(resp.GetCompleteStateResponse().GetCompleteState()), nil
}

// updateState sends an UpdateStateRequest and returns its success.
func (s *Session) updateState(ctx context.Context, newState *ankbase.CompleteState, masks []string) (*ankbase.UpdateStateSuccess, error) {
	s.debugf("sending an update with masks %q", masks)
	resp, err := s.Conn.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: newState, UpdateMask: masks},
	}})
	if err != nil {
		return nil, err
	}
	return resp.GetUpdateStateSuccess(), nil
}

// cancelRequest ends a subscription or log campaign on the server side. It
// runs when the command's context is already done, so it gets its own.
func (s *Session) cancelRequest(id string, req *ankbase.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
	defer cancel()
	req.RequestId = id
	if _, err := s.Conn.Request(ctx, req); err != nil {
		s.debugf("cancel request %s: %v", id, err)
	}
}
