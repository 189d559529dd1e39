package fsm

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// FSM applies committed commands to the replicated store.
type FSM struct {
	// mu guards store, applied, restores and the observers. Apply and
	// Restore take it for writing; readers take it through Read.
	mu      sync.RWMutex
	store   *state.Store
	applied uint64
	// restores counts the snapshots restored into this FSM, so that the
	// leader can tell that its memory no longer matches the store.
	restores uint64

	// observer, if set, is called after each apply with the command type
	// and the store, still under the write lock. The server uses it to
	// learn of changes it did not propose itself.
	observer func(t MessageType, index uint64)
	// restoreObserver, if set, is called after a restore, outside the lock.
	restoreObserver func()

	// halted is set once an entry could not be applied; nothing is
	// applied after it (see HaltError).
	halted       *HaltError
	haltObserver func(*HaltError)

	// revoked is a copy of the store's revoked certificates, replaced
	// after each removal and restore, so that every TLS handshake and
	// gRPC call can look a serial up without the lock (removals.go).
	revoked atomic.Pointer[map[string]state.RevokedCert]
	// clusterVersion is the store's cluster version, read without the
	// lock by the leader's gates (clusterversion.go).
	clusterVersion atomic.Uint32
}

// Meta describes the store a Read sees.
type Meta struct {
	// Applied is the index of the last applied entry.
	Applied uint64
	// Restores counts the snapshots restored so far; it changes when the
	// store was replaced instead of advanced entry by entry.
	Restores uint64
}

// New returns an FSM over an empty store.
func New() *FSM { return &FSM{store: state.NewStore()} }

// NewWithoutHistory returns an FSM that keeps no transaction history
// (docs/history.md): the benchmarks measure the history's cost against
// it. A snapshot restored into it brings a history back.
func NewWithoutHistory() *FSM {
	st := state.NewStore()
	st.History = nil
	return &FSM{store: st}
}

// SetObserver installs a callback run after every applied command. It must
// not block.
func (f *FSM) SetObserver(fn func(t MessageType, index uint64)) {
	f.mu.Lock()
	f.observer = fn
	f.mu.Unlock()
}

// SetRestoreObserver installs a callback run after every restore, once the
// new store is in place. It must not block.
func (f *FSM) SetRestoreObserver(fn func()) {
	f.mu.Lock()
	f.restoreObserver = fn
	f.mu.Unlock()
}

// Read runs fn with the store under the read lock. fn must not keep
// references to the mutable maps (States, Agents, DeleteGraph,
// ReportMarks) after it returns.
func (f *FSM) Read(fn func(s *state.Store, applied uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.store, f.applied)
}

// ReadMeta is Read with the restore counter.
func (f *FSM) ReadMeta(fn func(s *state.Store, m Meta)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.store, Meta{Applied: f.applied, Restores: f.restores})
}

// AppliedIndex is the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// Restores counts the snapshots restored into this FSM.
func (f *FSM) Restores() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.restores
}

// Apply implements raft.FSM. It returns nil, an error for a command it
// refused (the store is unchanged), or the type's response struct
// (*AgentGoneResponse, *WorkloadReportsResponse); for a batch, a
// BatchResponse holding one of those per command.
//
// An entry it cannot apply (an unknown or retired type, a body that does
// not decode, a cluster version newer than this build reads) halts the
// FSM instead of crashing the replica: see HaltError. From then on every
// entry is answered with the HaltError and nothing is applied.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLocked(l)
}

// ApplyBatch implements raft.BatchingFSM: Raft hands over the entries it
// committed together (up to MaxAppendEntries), and they apply under one
// hold of the lock, as one Batch entry's commands do, so that their
// desired-state updates copy the desired state once. Each entry applies
// at its own index and is answered as Apply would answer it; a reader
// sees all of them or none.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	f.store.BeginBatch()
	defer f.store.EndBatch()
	for i, l := range logs {
		out[i] = f.applyLocked(l)
	}
	return out
}

// applyLocked applies one entry; see Apply.
func (f *FSM) applyLocked(l *raft.Log) (resp any) {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	if f.halted != nil {
		return f.halted
	}
	t := MessageType(l.Data[0])
	defer func() {
		// Not a way to refuse an entry (those return an error): a bug in
		// the code that applies one. The replica halts there instead of
		// crashing, and keeps serving reads of what it applied.
		if p := recover(); p != nil {
			resp = f.haltLocked(l.Index, t, fmt.Errorf("%w: applying it panicked: %v", ErrUndecodable, p))
		}
	}()
	// The entry is decoded whole before any of it applies, so that it
	// applies whole or halts the FSM untouched.
	if t == BatchType {
		cmds, err := decodeBatch(l.Data[1:])
		if err != nil {
			return f.haltLocked(l.Index, t, err)
		}
		f.applied = l.Index
		return f.applyBatchLocked(cmds, l.Index)
	}
	c, err := decodeApplicable(t, l.Data[1:])
	if err != nil {
		return f.haltLocked(l.Index, t, err)
	}
	f.applied = l.Index
	return f.executeLocked(c, l.Index)
}

// decodeApplicable decodes the body of one command of type t and checks
// that this build may apply it (the refuse of its entry in the command
// table).
func decodeApplicable(t MessageType, body []byte) (Command, error) {
	c, err := decodeBody(t, body)
	if err != nil || c == nil {
		return nil, err
	}
	if refuse := commands[t].refuse; refuse != nil {
		if err := refuse(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// executeLocked applies one decoded command at index, refreshes what the
// FSM keeps of the store outside the lock, and tells the observer. A
// command of a type this version skips (nil) applies nothing.
func (f *FSM) executeLocked(c Command, index uint64) any {
	if c == nil {
		return nil
	}
	resp := Execute(f.store, c, index)
	if refresh := commands[c.Type()].refresh; refresh != nil {
		refresh(f)
	}
	if f.observer != nil {
		f.observer(c.Type(), index)
	}
	return resp
}

// haltLocked stops the FSM at the entry at index and tells the halt
// observer. It returns the HaltError, which Raft hands to the proposer.
func (f *FSM) haltLocked(index uint64, t MessageType, err error) *HaltError {
	f.halted = &HaltError{Index: index, Type: t, Err: err}
	if f.haltObserver != nil {
		f.haltObserver(f.halted)
	}
	return f.halted
}

// Halted is the reason the FSM stopped applying, or nil.
func (f *FSM) Halted() *HaltError {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.halted
}

// SetHaltObserver installs a callback run once when the FSM halts, under
// its lock. It must not block.
func (f *FSM) SetHaltObserver(fn func(*HaltError)) {
	f.mu.Lock()
	f.haltObserver = fn
	f.mu.Unlock()
}

// Snapshot implements raft.FSM: it copies the store (Apply is blocked while
// it runs, so it only copies; encoding happens in Persist).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted != nil {
		// The log from the halted entry on must stay, so that an upgraded
		// replica applies it; a snapshot would let Raft compact it away.
		return nil, f.halted
	}
	return &snapshot{store: f.store.Clone(), index: f.applied}, nil
}

// Restore implements raft.FSM: it decodes into a fresh store, swaps it in
// and counts the restore.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	s, index, err := ReadSnapshot(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.store = s
	f.applied = index
	f.restores++
	f.copyRevokedLocked()
	f.copyClusterVersionLocked()
	// The snapshot holds what the halted entry did, as applied by the
	// replica that wrote it: applying may go on from there.
	f.halted = nil
	notify := f.restoreObserver
	f.mu.Unlock()
	if notify != nil {
		notify()
	}
	return nil
}
