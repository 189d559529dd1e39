package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// Rejected requests go into the history without a Raft entry each
// (docs/history.md): a client that floods bad requests must not cost a
// flash write per request. The leader collects them, equal ones (same
// requester, same reason) conflated into one with a count, and the next
// entry it proposes for any reason takes them along. When none is
// proposed within rejectionFlushDelay, one HistoryNotes entry takes
// them: at most one entry per delay, however many requests are refused.
// Rejections still collected when leadership ends are lost.
const (
	rejectionFlushDelay = 10 * time.Second
	// maxPendingRejections bounds the distinct rejections collected
	// between two entries; the ones beyond are counted in one record.
	maxPendingRejections = 16
	// maxRejectionReason bounds the reason kept of one rejection.
	maxRejectionReason = 512
)

// rejections is the leader's collection of refused requests not yet in
// an entry. It is owned by the leader loop.
type rejections struct {
	pending []fsm.Rejection
	counts  []uint32
	// over counts the rejections beyond maxPendingRejections.
	over     uint32
	overTime int64
	// timer, while set, posts to flush when the delay is over.
	timer clock.Timer
	flush chan struct{}
}

// recordRejection collects a refused request for the history.
func (l *leader) recordRejection(requester string, mask []string, reason string) {
	if len(reason) > maxRejectionReason {
		reason = reason[:maxRejectionReason] + "…"
	}
	// An entry's strings must be UTF-8 or it does not encode: the cut
	// may split a character, and one bad rejection must not fail the
	// update it rides along with.
	reason = strings.ToValidUTF8(reason, "�")
	l.collect(fsm.Rejection{TimeMs: l.clock.Now().UnixMilli(), Requester: requester, UpdateMask: mask, Reason: reason}, 1)
}

// refusedBeforeProposing handles an update the leader refused after its
// history part was built (over the update budget): the refusals that
// part took are collected again, and the update itself is one.
func (l *leader) refusedBeforeProposing(m *fsm.HistoryMeta, err error) {
	for _, r := range m.Rejections {
		l.collect(r, max(r.Count, 1))
	}
	l.recordRejection(m.Requester, m.UpdateMask, err.Error())
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
	if r.timer == nil {
		stop := l.term.stop
		r.timer = l.clock.AfterFunc(rejectionFlushDelay, func() {
			select {
			case r.flush <- struct{}{}:
			case <-stop:
			}
		})
	}
}

// takeRejections hands the collected rejections to an entry being built
// and forgets them.
func (l *leader) takeRejections() []fsm.Rejection {
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
	r.pending, r.counts, r.over = nil, nil, 0
	r.stopTimer()
	return out
}

// flushRejections writes the collected rejections in an entry of their
// own: no other entry took them within the delay.
func (l *leader) flushRejections() {
	l.rejects.timer = nil
	if len(l.rejects.pending) == 0 && l.rejects.over == 0 {
		return
	}
	l.propose(&fsm.HistoryNotesRequest{History: *l.historyMeta("", nil, true)}, nil, nil)
}

// stopTimer stops the flush timer, at the end of the term or when an
// entry took the rejections.
func (r *rejections) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}
