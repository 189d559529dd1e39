package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// maxInFlight bounds the entries proposed but not yet settled; while that
// many are out, the leader loop stops reading its inbox.
const maxInFlight = 256

// DefaultGroupCommitMaxBatch is the most proposals handed to Raft in one
// go, as one Batch entry, and maxBatchBytes the most bytes of them in one
// entry: a proposal larger than that goes alone. A most of 1 hands each
// proposal to Raft as its own entry, and only Raft batches: its apply
// channel (BatchApplyCh) groups the entries that wait into one log write
// and one AppendEntries, and the FSM applies what commits together at
// once (fsm.FSM.ApplyBatch). docs/replication.md compares the two.
const (
	DefaultGroupCommitMaxBatch = 64
	maxBatchBytes              = 1 << 20
)

// DefaultGroupCommitDelay is how long a proposal that arrives while an
// earlier batch is still being committed may wait for others to join it.
// A lone request never waits (nothing is outstanding), and a batch that
// fills goes at once. Under load, fewer and larger batches mean fewer log
// writes, AppendEntries and FSM batches per update: with 16 writers on
// this project's 2-core test machine a 1 ms delay gave about 9 % more
// updates per second and a lower p50 on bbolt; on the WAL this batching
// wrote 7-12 % fewer bytes per update than Raft's own alone, at no cost
// in throughput (docs/replication.md). PostgreSQL's commit_delay and
// MySQL's binlog_group_commit_sync_delay are the same idea.
const DefaultGroupCommitDelay = time.Millisecond

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

	// batched says the entry went to Raft inside a fsm.BatchType entry
	// at position pos, and its future is the batch's.
	batched bool
	pos     int
}

// pipeline proposes entries without waiting for earlier ones to commit
// (group commit) and hands them back to the leader loop, which settles
// them strictly in proposal order.
//
// Goroutines: the proposer calls apply (Node.ApplyAsync) in queue order,
// so a full Raft apply queue blocks it and never the leader loop; it
// stops when stop closes and stopAndWait waits for it. It hands entries
// over in batches: at once when no batch is outstanding, otherwise when
// maxBatch wait, when the oldest has waited delay, or when the
// outstanding batches have settled. For each batch a waiter goroutine
// waits for its futures and posts the batch to done, never blocking once
// stop is closed; it ends as soon as Raft resolves the futures, which
// Raft does for every entry it accepted while it runs (commit, lost
// leadership, shutdown). The delay's timer callback only posts to the
// buffered wake channel.
//
// The leader gives the pipeline the real clock even when the server runs
// on a fake one: the pipeline's times (the delay, the commit latency it
// reports) measure how fast Raft is and change when entries go, never
// what they do, and tests that count the server's timers must not see
// its delay timer. Its own tests give it a fake clock. Channel
// capacities exceed the in-flight bound with slack for the few entries
// one message adds after the bound check; a larger burst (many agents
// gone at once) makes the loop wait for the proposer, which never waits
// for the loop.
type pipeline struct {
	apply   func(cmd []byte, timeout time.Duration) raft.ApplyFuture
	timeout time.Duration
	clock   clock.Clock
	// delay is the group-commit delay; 0 or less hands every entry over
	// at once.
	delay time.Duration
	// maxBatch is the most entries in one Batch entry (1: none).
	maxBatch int
	// onBatch, if set, learns the size of every batch handed to Raft.
	onBatch func(n int)

	// queue is owned by the leader loop: every entry not yet settled, in
	// order. inFlight counts its proposals.
	queue    []*entry
	inFlight int

	proposeCh chan *entry
	done      chan []*entry
	// batchDone gets one token per settled batch; wake one when the
	// delay may have passed.
	batchDone chan struct{}
	wake      chan struct{}
	stop      <-chan struct{}
	wg        sync.WaitGroup
}

func newPipeline(apply func([]byte, time.Duration) raft.ApplyFuture, timeout, delay time.Duration, maxBatch int, clk clock.Clock, onBatch func(int), stop <-chan struct{}) *pipeline {
	if maxBatch < 1 {
		maxBatch = DefaultGroupCommitMaxBatch
	}
	// A single inbox message queues at most a few entries after the
	// full check, hence the slack.
	capacity := 2 * maxInFlight
	p := &pipeline{
		apply: apply, timeout: timeout, delay: delay, maxBatch: maxBatch, clock: clk, onBatch: onBatch, stop: stop,
		proposeCh: make(chan *entry, capacity),
		done:      make(chan []*entry, capacity),
		batchDone: make(chan struct{}, capacity),
		wake:      make(chan struct{}, 1),
	}
	p.wg.Add(1)
	go p.proposer()
	return p
}

func (p *pipeline) proposer() {
	defer p.wg.Done()
	var pending []*entry
	outstanding := 0 // batches handed to Raft and not yet settled
	armed := false   // a wake is due
	for {
		if len(pending) > 0 && p.mayGo(pending, outstanding) {
			n := batchLen(pending, p.maxBatch)
			batch := make([]*entry, n)
			copy(batch, pending)
			p.hand(batch)
			go p.wait(batch)
			if p.onBatch != nil {
				p.onBatch(n)
			}
			clear(pending[:n])
			pending = pending[n:]
			outstanding++
			continue
		}
		if len(pending) > 0 && !armed {
			// The wake may come early or late (a stale one after a batch
			// went); mayGo checks the time again.
			armed = true
			p.clock.AfterFunc(pending[0].start.Add(p.delay).Sub(p.clock.Now()), func() {
				select {
				case p.wake <- struct{}{}:
				default:
				}
			})
		}
		select {
		case e := <-p.proposeCh:
			pending = append(pending, e)
		case <-p.batchDone:
			outstanding--
		case <-p.wake:
			armed = false
		case <-p.stop:
			return
		}
	}
}

// batchLen is how many of the pending entries go in the next batch.
func batchLen(pending []*entry, maxBatch int) int {
	n, size := 0, 0
	for _, e := range pending {
		if n == maxBatch || n > 0 && size+len(e.buf) > maxBatchBytes {
			break
		}
		n++
		size += len(e.buf)
	}
	return n
}

// hand gives a batch to Raft: several entries as one fsm.BatchType entry,
// so that Raft writes, sends and applies one entry for all of them.
func (p *pipeline) hand(batch []*entry) {
	if len(batch) > 1 {
		cmds := make([][]byte, len(batch))
		for i, e := range batch {
			cmds[i] = e.buf
		}
		if buf, err := fsm.EncodeBatch(cmds); err == nil {
			f := p.apply(buf, p.timeout)
			for i, e := range batch {
				e.future, e.batched, e.pos = f, true, i
			}
			return
		}
		// Only an empty or batch command fails to join a batch, and the
		// leader proposes neither; should one come, each entry goes
		// alone and Raft's FSM judges it.
	}
	for _, e := range batch {
		e.future = p.apply(e.buf, p.timeout)
	}
}

// mayGo reports whether the pending entries go to Raft now.
func (p *pipeline) mayGo(pending []*entry, outstanding int) bool {
	return outstanding == 0 || len(pending) >= p.maxBatch || p.delay <= 0 ||
		!p.clock.Now().Before(pending[0].start.Add(p.delay))
}

// wait is the waiter of one batch. Raft settles a batch's entries in
// order, mostly together, so one waiter per batch and one hand-over to
// the leader loop cost less than one per entry.
func (p *pipeline) wait(batch []*entry) {
	for _, e := range batch {
		var index uint64
		e.resp, index, e.err = cluster.Outcome(e.future)
		if e.err == nil && e.batched {
			e.resp, e.err = pick(e.resp, e.pos)
		}
		if e.err == nil {
			e.index = index
		}
	}
	// Never blocks: there are fewer batches than the capacity.
	p.batchDone <- struct{}{}
	select {
	case p.done <- batch:
	case <-p.stop:
	}
}

// pick is the answer to the command at pos of a batch entry.
func pick(resp any, pos int) (any, error) {
	r, ok := resp.(fsm.BatchResponse)
	if !ok || pos >= len(r) {
		return nil, fmt.Errorf("%w: a batch entry was answered with %T", fsm.ErrBadCommand, resp)
	}
	if err, ok := r[pos].(error); ok {
		return nil, err
	}
	return r[pos], nil
}

// full reports whether the loop must stop taking new work.
func (p *pipeline) full() bool { return p.inFlight >= maxInFlight }

// empty reports whether nothing waits to settle.
func (p *pipeline) empty() bool { return len(p.queue) == 0 }

// enqueue queues an encoded command for the proposer.
func (p *pipeline) enqueue(t fsm.MessageType, buf []byte, commit func(any, uint64), fail func(error)) {
	e := &entry{typ: t, buf: buf, start: p.clock.Now(), commit: commit, fail: fail}
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
func (p *pipeline) settle(e *entry, observe func(t fsm.MessageType, d time.Duration, index uint64)) {
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
		observe(head.typ, p.clock.Now().Sub(head.start), head.index)
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
