package server

import (
	"errors"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/server/plan"
)

// proposal is a command encoded, decoded again with the FSM's own decoder
// and executed on the speculative store, ready to be queued. err says why
// it was refused before it was proposed; resp is what the command
// returned on the speculative store.
type proposal struct {
	typ  fsm.MessageType
	buf  []byte
	resp any
	err  error
}

// project checks a command and executes it on the speculative store, so
// that what its commit will send can be computed from the store it
// produces before it is queued: an entry that commits must apply on every
// replica, so anything that does not decode or apply here is refused
// (see submit).
func (l *leader) project(cmd fsm.Command) *proposal {
	prop := &proposal{typ: cmd.Type()}
	// The cluster version is raised by the cluster's own entry, which the
	// projection does not execute: it follows the FSM's (never down), so
	// the projected store rules as every replica will.
	l.projected.store.SetClusterVersion(l.s.fsm.ClusterVersion())
	prop.buf, prop.err = l.encodeChecked(cmd)
	if prop.err == nil {
		prop.resp, prop.err = l.projected.execute(prop.typ, prop.buf)
	}
	if prop.err == nil {
		l.notePlacementInput(cmd)
	}
	return prop
}

// submit queues a projected command for Raft. commit runs on the leader
// loop once the entry is committed, with the FSM's response and the
// entry's index, fail if it is not; both in proposal order. A command
// project refused is not proposed: fail learns why, in turn. The
// refusals the command's history part took along are answered with it
// (rejections.go); those of a command not proposed wait for the next.
func (l *leader) submit(prop *proposal, commit func(resp any, index uint64), fail func(err error)) {
	t := prop.typ
	if prop.err != nil {
		l.putBackCarried()
		l.s.log.Error("command refused before proposing", "type", t.String(), "error", prop.err)
		if fail != nil {
			err := prop.err
			l.pipe.ordered(func() { fail(err) })
		}
		return
	}
	commit, fail = l.carriedBy(commit, fail)
	l.pipe.enqueue(t, prop.buf, commit, func(err error) {
		if l.projected.failed && errors.Is(err, fsm.ErrOutOfSequence) {
			err = errEarlierFailed
		}
		l.entryFailed(t, err)
		if fail != nil {
			fail(err)
		}
	})
}

// propose projects a command and submits it, for callbacks that need
// nothing computed from the store it produces.
func (l *leader) propose(cmd fsm.Command, commit func(resp any, index uint64), fail func(err error)) {
	l.submit(l.project(cmd), commit, fail)
}

// encodeChecked encodes a command and refuses one larger than the
// update budget (plan.EncodeChecked).
func (l *leader) encodeChecked(cmd fsm.Command) ([]byte, error) {
	return plan.EncodeChecked(l.s.limits, cmd)
}

// errEarlierFailed answers an update the FSM refused because an update
// proposed before it failed.
var errEarlierFailed = errors.New("an earlier update in the same batch failed")

// errPlannedOnFailed answers an update that changed nothing when an
// update proposed before it failed: it found nothing to change in the
// state that update would have made, which did not come to be.
var errPlannedOnFailed = errors.New("an update proposed before it failed, so the state it found nothing to change in did not come to be; nothing changed: ask again")

// orderedUnchanged answers an update that changes nothing once every entry
// queued before it has settled: ok when they all committed, fail with
// errPlannedOnFailed when one of them failed. It was planned on the
// projection they make, so answering ok then would acknowledge, say, a
// delete of a workload the failed entry was to delete and that is still
// there (found by the chaos campaign's linearizability check during a
// leadership transfer).
func (l *leader) orderedUnchanged(ok func(), fail func(err error)) {
	l.pipe.ordered(func() {
		if l.projected.failed {
			fail(errPlannedOnFailed)
			return
		}
		ok()
	})
}

// entryFailed marks the speculative store as no longer predicting the FSM.
// The entries after the failed one settle first: the FSM refuses the
// desired-state updates among them by their sequence number.
func (l *leader) entryFailed(t fsm.MessageType, err error) {
	if l.projected.markFailed() {
		l.s.log.Warn("raft entry failed; draining the pipeline", "type", t.String(), "error", err)
	}
}
