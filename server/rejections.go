package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// Refused requests go into the history without a Raft entry each
// (docs/history.md), and a client learns of a refusal only once it is
// there: a client that saw a refusal finds it in the history, across a
// leader's loss. The leader collects refusals, equal ones (same
// requester, same reason) conflated into one with a count, and the next
// entry it proposes for any reason takes them along; their answers go
// out when that entry commits, and fail as an in-flight write's do when
// it does not. When no entry comes, a HistoryNotes entry takes them: a
// lone refusal after a quiet spell at once, the ones that follow when
// the flush window since the last such entry is over. Each flush doubles
// the window, from firstFlushWindow up to rejectionFlushDelay, and a
// quiet rejectionFlushDelay resets it. So a flood costs one entry per
// window (after a handful, one per rejectionFlushDelay) and its answers
// wait for the window, while a lone refusal is answered in the time of
// one commit.
const (
	rejectionFlushDelay = 10 * time.Second
	// firstFlushWindow is the window after a flush that followed a
	// quiet spell.
	firstFlushWindow = 25 * time.Millisecond
	// maxPendingRejections bounds the distinct rejections collected
	// between two entries; the ones beyond are counted in one record.
	maxPendingRejections = 16
	// maxRejectionReason bounds the reason kept of one rejection.
	maxRejectionReason = 512
	// maxWaitingRefusals bounds the answers that wait for the flush:
	// a flood beyond it is answered busy at once (and counted), so
	// that its waiting answers cost bounded memory.
	maxWaitingRefusals = 1024
)

// refusalAnswer answers one refused request: answer with the refusal
// once an entry holding it committed, retry with the entry's error (the
// loss of leadership) when none did.
type refusalAnswer struct {
	answer func()
	retry  func(error)
}

// rejections is the leader's collection of refused requests not yet in
// a committed entry. It is owned by the leader loop.
type rejections struct {
	pending []fsm.Rejection
	counts  []uint32
	// over counts the rejections beyond maxPendingRejections.
	over     uint32
	overTime int64
	// answers wait for the pending rejections to commit.
	answers []refusalAnswer
	// carried are the rejections takeRejections handed to the entry
	// being built, with their answers, until submit queues it (or puts
	// them back, should it not be proposed).
	carried        []fsm.Rejection
	carriedAnswers []refusalAnswer
	// timer, while set, posts to flush when the window is over.
	timer clock.Timer
	flush chan struct{}
	// last is when the last flush entry was written, next the earliest
	// the next may be, window the gap that follows it.
	last, next time.Time
	window     time.Duration
}

// refuse collects a refused request for the history; answer and retry
// (either may be nil) tell its requester once the history holds it, or
// that the leader could not make it hold it.
func (l *leader) refuse(requester string, mask []string, reason string, answer func(), retry func(error)) {
	if len(reason) > maxRejectionReason {
		reason = reason[:maxRejectionReason] + "…"
	}
	// An entry's strings must be UTF-8 or it does not encode: the cut
	// may split a character, and one bad rejection must not fail the
	// update it rides along with.
	reason = strings.ToValidUTF8(reason, "�")
	if n := len(l.rejects.answers) + len(l.rejects.carriedAnswers); n >= maxWaitingRefusals {
		// Counted in the history, but not told: a client that saw a
		// refusal must find it there.
		if retry != nil {
			retry(fmt.Errorf("%w: %d refused requests wait for the history to record them; ask again later", errs.ErrBusy, n))
		}
	} else {
		l.rejects.answers = append(l.rejects.answers, refusalAnswer{answer: answer, retry: retry})
	}
	l.collect(fsm.Rejection{TimeMs: l.clock.Now().UnixMilli(), Requester: requester, UpdateMask: mask, Reason: reason}, 1)
}

// refusedBeforeProposing handles an update the leader refused after its
// history part was built (over the update budget): the refusals that
// part took wait for another entry, and the update itself is one, told
// by fail as the update's other failures are.
func (l *leader) refusedBeforeProposing(m *fsm.HistoryMeta, err error, fail func(error)) {
	l.putBackCarried()
	var answer func()
	if fail != nil {
		answer = func() { fail(err) }
	}
	l.refuse(m.Requester, m.UpdateMask, err.Error(), answer, fail)
}

// collect adds n refusals like rej to the collection and arms the flush.
func (l *leader) collect(rej fsm.Rejection, n uint32) {
	r := &l.rejects
	found := false
	for i, p := range r.pending {
		if p.Requester == rej.Requester && p.Reason == rej.Reason {
			r.counts[i] += n
			found = true
			break
		}
	}
	switch {
	case found:
	case len(r.pending) < maxPendingRejections:
		rej.Count = 0
		r.pending = append(r.pending, rej)
		r.counts = append(r.counts, n)
	default:
		if r.over == 0 {
			r.overTime = rej.TimeMs
		}
		r.over += n
	}
	l.armFlush()
}

// armFlush makes the loop flush the collection when the window allows:
// at once after a quiet spell (by the next turn of the loop), else when
// the window since the last flush is over.
func (l *leader) armFlush() {
	r := &l.rejects
	if r.timer != nil {
		return
	}
	now := l.clock.Now()
	if r.window == 0 || now.Sub(r.last) >= rejectionFlushDelay {
		r.window, r.next = firstFlushWindow, now
	}
	wait := r.next.Sub(now)
	if wait <= 0 {
		r.post()
		return
	}
	r.timer = l.clock.AfterFunc(wait, r.post)
}

// post asks the leader loop to flush; one request waiting is enough.
func (r *rejections) post() {
	select {
	case r.flush <- struct{}{}:
	default:
	}
}

// takeRejections hands the collected rejections to an entry being built
// and keeps their answers for submit (carried). Rejections carried to an
// entry that was never submitted go along again.
func (l *leader) takeRejections() []fsm.Rejection {
	l.putBackCarried()
	r := &l.rejects
	if len(r.pending) == 0 && r.over == 0 {
		return nil
	}
	out := r.pending
	for i, n := range r.counts {
		if n > 1 {
			out[i].Count = n
		}
	}
	if r.over > 0 {
		out = append(out, fsm.Rejection{TimeMs: r.overTime, Count: r.over,
			Reason: fmt.Sprintf("%d more rejected requests, not itemised (over %d distinct ones between two entries)", r.over, maxPendingRejections)})
	}
	r.carried, r.carriedAnswers = out, r.answers
	r.pending, r.counts, r.over, r.answers = nil, nil, 0, nil
	r.stopTimer()
	return out
}

// putBackCarried collects the carried rejections again: the entry they
// were handed to was not proposed.
func (l *leader) putBackCarried() {
	r := &l.rejects
	recs, answers := r.carried, r.carriedAnswers
	r.carried, r.carriedAnswers = nil, nil
	l.recollect(recs, answers)
}

// recollect collects rejections that no entry recorded, with their
// answers, to wait for the next.
func (l *leader) recollect(recs []fsm.Rejection, answers []refusalAnswer) {
	if len(recs) == 0 && len(answers) == 0 {
		return
	}
	r := &l.rejects
	r.answers = append(answers, r.answers...)
	for _, rec := range recs {
		l.collect(rec, max(rec.Count, 1))
	}
	if len(recs) == 0 {
		l.armFlush()
	}
}

// carriedBy wraps the callbacks of the entry being queued so that the
// rejections it carries are answered when it commits: before its own
// answer, as they were recorded before its own transaction. When it
// fails, the requesters get its error, as in-flight writes do; but an
// update the FSM refused for its sequence number recorded nothing, so
// its rejections wait for the next entry. Without carried rejections
// the callbacks are returned as they are.
func (l *leader) carriedBy(commit func(any, uint64), fail func(error)) (func(any, uint64), func(error)) {
	r := &l.rejects
	recs, answers := r.carried, r.carriedAnswers
	r.carried, r.carriedAnswers = nil, nil
	if len(answers) == 0 {
		return commit, fail
	}
	return func(resp any, index uint64) {
			for _, a := range answers {
				if a.answer != nil {
					a.answer()
				}
			}
			if commit != nil {
				commit(resp, index)
			}
		}, func(err error) {
			if errors.Is(err, fsm.ErrOutOfSequence) || errors.Is(err, errEarlierFailed) {
				l.recollect(recs, answers)
			} else {
				failAnswers(answers, err)
			}
			if fail != nil {
				fail(err)
			}
		}
}

// failAnswers tells the requesters of rejections that are not recorded
// the leader's error.
func failAnswers(answers []refusalAnswer, err error) {
	for _, a := range answers {
		if a.retry != nil {
			a.retry(err)
		}
	}
}

// flushRejections writes the collected rejections in an entry of their
// own: no other entry took them within the window.
func (l *leader) flushRejections() {
	r := &l.rejects
	if len(r.pending) == 0 && r.over == 0 {
		r.stopTimer()
		return
	}
	now := l.clock.Now()
	if now.Before(r.next) {
		// An early request (one posted before an entry took the
		// rejections it was for): the window decides.
		l.armFlush()
		return
	}
	r.stopTimer()
	r.last, r.next = now, now.Add(r.window)
	r.window = min(2*r.window, rejectionFlushDelay)
	l.propose(&fsm.HistoryNotesRequest{History: *l.historyMeta("", nil, true)}, nil, nil)
}

// abandonRejections ends the term: the refusals no entry recorded are
// answered with err, as the writes in flight are.
func (l *leader) abandonRejections(err error) {
	r := &l.rejects
	r.stopTimer()
	answers := append(r.carriedAnswers, r.answers...)
	r.pending, r.counts, r.over, r.answers, r.carried, r.carriedAnswers = nil, nil, 0, nil, nil, nil
	failAnswers(answers, err)
}

// stopTimer stops the flush timer, at the end of the term or when an
// entry took the rejections.
func (r *rejections) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}
