package server

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
)

// maxInFlight bounds the entries proposed but not yet settled; while that
// many are out, the leader loop stops reading its inbox.
const maxInFlight = 256

// entry is one step of the leader's ordered pipeline: a Raft proposal, or
// a local action (an answer that must not overtake earlier proposals).
// The leader loop settles entries strictly in the order it queued them.
type entry struct {
	typ   fsm.MessageType
	buf   []byte
	local bool
	start time.Time

	// future is set by the proposer; err and resp by the waiter before it
	// hands the entry back, which orders these writes before the loop's
	// reads.
	future raft.ApplyFuture
	err    error
	resp   any
	index  uint64
	done   bool

	// commit runs on the leader loop once the entry is committed and
	// applied, with the FSM's response and the entry's Raft index (a
	// local entry: once every earlier entry has settled); fail runs
	// instead when Raft or the FSM refused the entry.
	commit func(resp any, index uint64)
	fail   func(err error)
}

// pipeline proposes entries without waiting for earlier ones to commit
// (group commit) and hands them back to the leader loop, which settles
// them strictly in proposal order.
//
// Goroutines: the proposer calls apply (Node.ApplyAsync) in queue order,
// so a full Raft apply queue blocks it and never the leader loop; it
// stops when stop closes and stopAndWait waits for it. For each proposed
// entry a waiter goroutine waits for the future and posts the entry to
// done, never blocking once stop is closed; it ends as soon as Raft
// resolves the future, which Raft does for every entry it accepted while
// it runs (commit, lost leadership, shutdown). Channel capacities exceed
// the in-flight bound with slack for the few entries one message adds
// after the bound check; a larger burst (many agents gone at once) makes
// the loop wait for the proposer, which never waits for the loop.
type pipeline struct {
	apply   func(cmd []byte, timeout time.Duration) raft.ApplyFuture
	timeout time.Duration
	now     func() time.Time

	// queue is owned by the leader loop: every entry not yet settled, in
	// order. inFlight counts its proposals.
	queue    []*entry
	inFlight int

	proposeCh chan *entry
	done      chan *entry
	stop      <-chan struct{}
	wg        sync.WaitGroup
}

func newPipeline(apply func([]byte, time.Duration) raft.ApplyFuture, timeout time.Duration, now func() time.Time, stop <-chan struct{}) *pipeline {
	// A single inbox message queues at most a few entries after the
	// full check, hence the slack.
	capacity := 2 * maxInFlight
	p := &pipeline{
		apply: apply, timeout: timeout, now: now, stop: stop,
		proposeCh: make(chan *entry, capacity),
		done:      make(chan *entry, capacity),
	}
	p.wg.Add(1)
	go p.proposer()
	return p
}

func (p *pipeline) proposer() {
	defer p.wg.Done()
	for {
		select {
		case e := <-p.proposeCh:
			e.future = p.apply(e.buf, p.timeout)
			go p.wait(e)
		case <-p.stop:
			return
		}
	}
}

// wait is the waiter of one entry.
func (p *pipeline) wait(e *entry) {
	e.resp, e.err = outcome(e.future)
	if e.err == nil {
		e.index = e.future.Index()
	}
	select {
	case p.done <- e:
	case <-p.stop:
	}
}

// outcome waits for a proposal and folds an FSM refusal into the error.
func outcome(f raft.ApplyFuture) (any, error) {
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, fmt.Errorf("%w: %v", cluster.ErrNotLeader, err)
		}
		return nil, err
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// full reports whether the loop must stop taking new work.
func (p *pipeline) full() bool { return p.inFlight >= maxInFlight }

// empty reports whether nothing waits to settle.
func (p *pipeline) empty() bool { return len(p.queue) == 0 }

// propose queues an encoded command.
func (p *pipeline) propose(t fsm.MessageType, buf []byte, commit func(any, uint64), fail func(error)) {
	e := &entry{typ: t, buf: buf, start: p.now(), commit: commit, fail: fail}
	p.queue = append(p.queue, e)
	p.inFlight++
	p.proposeCh <- e
}

// ordered runs fn once every entry queued before it has settled: now if
// none is waiting.
func (p *pipeline) ordered(fn func()) {
	if p.empty() {
		fn()
		return
	}
	p.queue = append(p.queue, &entry{local: true, commit: func(any, uint64) { fn() }})
}

// settle marks a proposal as back from Raft and runs, in order, every
// entry whose turn has come. observe gets each proposal's type and time
// to commit.
func (p *pipeline) settle(e *entry, observe func(fsm.MessageType, time.Duration)) {
	e.done = true
	for len(p.queue) > 0 {
		head := p.queue[0]
		if !head.local && !head.done {
			return
		}
		p.queue[0] = nil
		p.queue = p.queue[1:]
		if head.local {
			head.commit(nil, 0)
			continue
		}
		p.inFlight--
		observe(head.typ, p.now().Sub(head.start))
		if head.err != nil {
			if head.fail != nil {
				head.fail(head.err)
			}
		} else if head.commit != nil {
			head.commit(head.resp, head.index)
		}
	}
}

// abandon fails every proposal still queued with err and drops the local
// actions: the term is over.
func (p *pipeline) abandon(err error) {
	q := p.queue
	p.queue, p.inFlight = nil, 0
	for _, e := range q {
		if !e.local && e.fail != nil {
			e.fail(err)
		}
	}
}

// stopAndWait waits for the proposer once stop is closed.
func (p *pipeline) stopAndWait() { p.wg.Wait() }
