package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// event is a line of a source, or its end (after its last line).
type event struct {
	src    *source
	msg    string
	hasMsg bool
	end    bool
}

// source is one instance's log reader; it holds one of the agent's
// source slots until it is closed.
type source struct {
	name *ankbase.WorkloadInstanceName
	rc   io.ReadCloser
	c    *Campaigns
	once sync.Once
}

func (s *source) close() {
	s.once.Do(func() {
		_ = s.rc.Close()
		s.c.releaseSource()
	})
}

// campaign is one LogsRequest. Its goroutine run owns the batch and the
// timer; one reader goroutine per source feeds it events.
type campaign struct {
	c      *Campaigns
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	events chan event
	flushC chan struct{}

	// sendMu guards stopped and is held during a send, so that no send
	// starts after stop.
	sendMu  sync.Mutex
	stopped bool

	// mu guards sources and closed.
	mu      sync.Mutex
	sources []*source
	closed  bool

	// Owned by run.
	batch []*ankbase.LogEntry
	size  int
	timer clock.Timer
}

// run opens the sources, then forwards their lines until every source
// ended or the campaign stopped.
//
// swdd~agent-workload-log-facade-forwards-logs-to-server~1
// swdd~agent-workload-log-facade-sends-logs-stop-response~1
func (cp *campaign) run(names []*ankbase.WorkloadInstanceName, opts runtime.LogOptions, optErr error) {
	defer cp.c.wg.Done()
	defer cp.c.forget(cp)
	defer cp.stopTimer()
	log := cp.c.log.With("requestId", cp.id)
	if optErr != nil {
		// Ankaios passes the times to the runtime, whose complaint shows
		// up as the source's only line; so does ours, and so does a
		// refusal at the agent's cap (logged, rate-limited, by Start).
		if !errors.Is(optErr, ErrBusy) {
			log.Warn("logs: refusing the request", "err", optErr)
		}
		for _, n := range names {
			err := cp.sendEntries([]*ankbase.LogEntry{{WorkloadName: n, Message: optErr.Error()}})
			if err == nil {
				err = cp.sendStop(n)
			}
			if err != nil {
				cp.fail(err, log)
				return
			}
		}
		return
	}
	live := 0
	for _, n := range names {
		ok, notice := cp.open(n, opts, log)
		if ok {
			live++
			continue
		}
		var err error
		if notice != "" {
			err = cp.sendEntries([]*ankbase.LogEntry{{WorkloadName: n, Message: notice}})
		}
		if err == nil {
			err = cp.sendStop(n)
		}
		if err != nil {
			cp.fail(err, log)
			return
		}
	}
	for live > 0 {
		var err error
		select {
		case ev := <-cp.events:
			if ev.hasMsg {
				err = cp.add(&ankbase.LogEntry{WorkloadName: ev.src.name, Message: ev.msg})
			}
			if err == nil && ev.end {
				live--
				if err = cp.flush(); err == nil {
					err = cp.sendStop(ev.src.name)
				}
			}
		case <-cp.flushC:
			err = cp.flush()
		case <-cp.ctx.Done():
			return
		}
		if err != nil {
			cp.fail(err, log)
			return
		}
	}
}

// open starts the source of one instance; false when the agent does not
// run it, its runtime cannot give its logs, or the agent holds
// MaxSources sources already (then notice says so, for the requester).
//
// swdd~agent-runtime-manager-creates-log-fetchers~1
// swdd~agent-log-fetching-runs-log-fetchers~1
func (cp *campaign) open(n *ankbase.WorkloadInstanceName, opts runtime.LogOptions, log *slog.Logger) (ok bool, notice string) {
	inst := rpc.InstanceNameFromProto(n)
	if cp.c.cfg.Lookup == nil {
		return false, ""
	}
	rt, id, ok := cp.c.cfg.Lookup(inst)
	if !ok {
		log.Info("logs: no such instance here", "instance", inst.String())
		return false, ""
	}
	if held, ok := cp.c.reserveSource(); !ok {
		cp.c.refusals.Log(cp.c.log, slog.LevelWarn, "sources", "logs: refusing a log source over the agent's cap",
			"requestId", cp.id, "instance", inst.String(), "max", cp.c.cfg.MaxSources)
		return false, fmt.Sprintf("%v: the agent%s reads %d log sources, as many as it may (--max-log-sources %d); try again once a campaign has ended",
			ErrBusy, cp.c.named(), held, cp.c.cfg.MaxSources)
	}
	rc, err := rt.Logs(cp.ctx, id, opts)
	if err != nil {
		cp.c.releaseSource()
		log.Info("logs: cannot read the logs", "instance", inst.String(), "err", err)
		return false, ""
	}
	src := &source{name: n, rc: rc, c: cp.c}
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		src.close()
		return false, ""
	}
	cp.sources = append(cp.sources, src)
	cp.c.wg.Add(1)
	cp.mu.Unlock()
	go cp.read(src, log)
	return true, ""
}

// read turns a source into events, one per line, then its end.
//
// swdd~agent-log-fetching-collects-logs~1
// swdd~agent-checks-size-of-logs~1
func (cp *campaign) read(src *source, log *slog.Logger) {
	defer cp.c.wg.Done()
	defer src.close()
	lines := newLineReader(src.rc, cp.c.cfg.MaxBatch, cp.c.lineLimit)
	for {
		line, err := lines.next()
		switch {
		case err == nil:
			if !cp.emit(event{src: src, msg: strings.ToValidUTF8(string(line), "\uFFFD"), hasMsg: true}) {
				return
			}
		case errors.Is(err, errLineLimit):
			log.Warn("logs: a line is too long, ending the source", "instance", rpc.InstanceNameFromProto(src.name).String())
			cp.emit(event{src: src, msg: lineLimitNotice(cp.c.lineLimit), hasMsg: true, end: true})
			return
		default:
			if !errors.Is(err, io.EOF) && cp.ctx.Err() == nil {
				log.Info("logs: reading ended", "instance", rpc.InstanceNameFromProto(src.name).String(), "err", err)
			}
			cp.emit(event{src: src, end: true})
			return
		}
	}
}

func lineLimitNotice(limit int) string {
	return "The previous log message exceeded the maximum " + sizeText(limit) + " size. Closing the log campaign."
}

// emit passes an event to run; false once the campaign stopped.
func (cp *campaign) emit(ev event) bool {
	select {
	case cp.events <- ev:
		return true
	case <-cp.ctx.Done():
		return false
	}
}

// add puts an entry into the batch, sending the batch first when the
// entry would take it over the limit.
func (cp *campaign) add(e *ankbase.LogEntry) error {
	limit := cp.c.cfg.MaxBatch
	n := entrySize(e)
	if n > limit {
		if err := cp.flush(); err != nil {
			return err
		}
		return cp.sendEntries(truncate(e, limit))
	}
	if cp.size+n > limit {
		if err := cp.flush(); err != nil {
			return err
		}
	}
	cp.batch = append(cp.batch, e)
	cp.size += n
	if cp.size == limit {
		return cp.flush()
	}
	if len(cp.batch) == 1 {
		cp.timer = cp.c.cfg.Clock.AfterFunc(flushAfter, func() {
			select {
			case cp.flushC <- struct{}{}:
			default:
			}
		})
	}
	return nil
}

// flush sends the batch, if any.
func (cp *campaign) flush() error {
	cp.stopTimer()
	if len(cp.batch) == 0 {
		return nil
	}
	b := cp.batch
	cp.batch, cp.size = nil, 0
	return cp.sendEntries(b)
}

func (cp *campaign) stopTimer() {
	if cp.timer != nil {
		cp.timer.Stop()
		cp.timer = nil
	}
}

func (cp *campaign) sendEntries(es []*ankbase.LogEntry) error {
	return cp.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{
		LogEntriesResponse: &grpcapi.LogEntriesResponse{RequestId: cp.id, LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: es}}}})
}

func (cp *campaign) sendStop(n *ankbase.WorkloadInstanceName) error {
	return cp.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogsStopResponse{
		LogsStopResponse: &grpcapi.LogsStopResponse{RequestId: cp.id, LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: n}}}})
}

func (cp *campaign) send(m *grpcapi.ToServer) error {
	cp.sendMu.Lock()
	defer cp.sendMu.Unlock()
	if cp.stopped {
		return errStopped
	}
	if cp.c.cfg.Send == nil {
		return errNoSend
	}
	return cp.c.cfg.Send(m)
}

// fail ends a campaign whose messages cannot be sent.
func (cp *campaign) fail(err error, log *slog.Logger) {
	if errors.Is(err, errStopped) {
		return
	}
	log.Warn("logs: cannot send, dropping the campaign", "err", err)
	cp.c.forget(cp)
	cp.stop()
}

// stop ends the campaign: no send starts after it returns, and the
// readers are closed.
//
// swdd~agent-log-fetching-stops-collection-when-dropped~1
func (cp *campaign) stop() {
	cp.sendMu.Lock()
	cp.stopped = true
	cp.sendMu.Unlock()
	cp.cancel()
	cp.mu.Lock()
	cp.closed = true
	srcs := cp.sources
	cp.mu.Unlock()
	for _, s := range srcs {
		s.close()
	}
}
