package server

import (
	"errors"
	"fmt"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/state"
)

// rebuild reads the leader memory that mirrors the FSM: the speculative
// store. It runs on establishing
// leadership and whenever the pipeline has drained after a failure or a
// restore. After a restore the agents hold workloads of a state that is
// gone, so they are disconnected and given the grace to come back and get
// a fresh ServerHello.
func (l *leader) rebuild() {
	first := l.spec == nil
	var restores uint64
	l.s.fsm.ReadMeta(func(st *state.Store, m fsm.Meta) {
		l.spec = st.Clone()
		restores = m.Restores
	})
	if !first && restores != l.restores {
		l.resync = true
	}
	l.restores = restores
	l.broken, l.failed = false, false
	if l.resync {
		l.resync = false
		l.resyncAgents()
	}
}

// restoreSeen reacts to a snapshot restore: the speculative store is
// stale, so no new work is taken until the pipeline drains; then rebuild
// resynchronises the agents.
func (l *leader) restoreSeen() {
	if l.s.fsm.Restores() == l.restores {
		return
	}
	l.s.log.Warn("the store was restored from a snapshot; rebuilding the leader state")
	l.broken, l.resync = true, true
}

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
	p := &proposal{typ: cmd.Type()}
	p.buf, p.err = l.encodeChecked(cmd)
	if p.err == nil {
		p.resp, p.err = l.executeSpec(p.typ, p.buf)
	}
	return p
}

// submit queues a projected command for Raft. commit runs on the leader
// loop once the entry is committed, with the FSM's response and the
// entry's index, fail if it is not; both in proposal order. A command
// project refused is not proposed: fail learns why, in turn.
func (l *leader) submit(p *proposal, commit func(resp any, index uint64), fail func(err error)) {
	t := p.typ
	if p.err != nil {
		l.s.log.Error("command refused before proposing", "type", t.String(), "error", p.err)
		if fail != nil {
			err := p.err
			l.pipe.ordered(func() { fail(err) })
		}
		return
	}
	l.pipe.propose(t, p.buf, commit, func(err error) {
		if l.failed && errors.Is(err, fsm.ErrOutOfSequence) {
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
// update budget: Raft would store, send and apply it on every replica.
func (l *leader) encodeChecked(cmd fsm.Command) ([]byte, error) {
	buf, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	if max := l.s.limits.MaxUpdateBytes; max > 0 && len(buf) > max {
		return nil, state.LimitError("", "update", "max_update_bytes", len(buf), max)
	}
	return buf, nil
}

// executeSpec decodes buf as every replica will and executes it on the
// speculative store. A command that does not decode, that the store
// refuses, or whose execution panics is an error: proposing it would make
// the FSM differ from the plan or halt every replica. A panic may have
// left the speculative store half-changed, so it is rebuilt once the
// pipeline drains.
func (l *leader) executeSpec(t fsm.MessageType, buf []byte) (resp any, err error) {
	dt, body, err := fsm.Decode(buf)
	if err != nil {
		return nil, fmt.Errorf("the command does not decode as the replicas will decode it: %w", err)
	}
	if dt != t || body == nil {
		return nil, fmt.Errorf("%w: %s decoded as %s", fsm.ErrBadCommand, t, dt)
	}
	defer func() {
		if p := recover(); p != nil {
			l.broken = true
			resp, err = nil, fmt.Errorf("%w: %s panicked on the speculative store: %v", fsm.ErrBadCommand, t, p)
		}
	}()
	// The speculative store never learns the entry's index; any non-zero
	// revision tells it that the desired state was set.
	resp = fsm.Execute(l.spec, body, l.spec.Revision+1)
	if err, ok := resp.(error); ok {
		// The leader planned a command its own store refuses: a bug, but
		// proposing it would make spec and FSM differ.
		return nil, err
	}
	return resp, nil
}

// errEarlierFailed answers an update the FSM refused because an update
// proposed before it failed.
var errEarlierFailed = errors.New("an earlier update in the same batch failed")

// entryFailed marks the speculative store as no longer predicting the FSM.
// The entries after the failed one settle first: the FSM refuses the
// desired-state updates among them by their sequence number.
func (l *leader) entryFailed(t fsm.MessageType, err error) {
	if !l.failed {
		l.s.log.Warn("raft entry failed; draining the pipeline", "type", t.String(), "error", err)
	}
	l.broken, l.failed = true, true
}
