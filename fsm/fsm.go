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
// An entry it cannot apply (an unknown type, a body that does not
// decode, a panic while applying) halts the FSM instead of crashing the
// replica: see HaltError. From then on every entry is answered with the
// HaltError and nothing is applied.
func (f *FSM) Apply(l *raft.Log) (resp any) {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halted != nil {
		return f.halted
	}
	t := MessageType(l.Data[0])
	defer func() {
		if p := recover(); p != nil {
			resp = f.haltLocked(l.Index, t, fmt.Errorf("%w: applying it panicked: %v", ErrUndecodable, p))
		}
	}()
	if t == BatchType {
		cmds, err := decodeBatch(l.Data[1:])
		if err != nil {
			return f.haltLocked(l.Index, t, err)
		}
		f.applied = l.Index
		// Each command of the batch reports itself to the observer.
		return f.applyBatchLocked(cmds, l.Index)
	}
	body, err := decodeBody(t, l.Data[1:])
	if err != nil {
		return f.haltLocked(l.Index, t, err)
	}
	f.applied = l.Index
	if body == nil {
		// A newer type that older replicas may skip.
		return nil
	}
	if err := tooNew(body); err != nil {
		return f.haltLocked(l.Index, t, err)
	}
	resp = Execute(f.store, body, l.Index)
	f.noteLocked(t)
	if f.observer != nil {
		f.observer(t, l.Index)
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

// Execute applies one decoded command to a store, exactly as Apply does
// after decoding. The leader runs it on its speculative copy of the store
// so that it plans the next update on what the FSM will hold.
func Execute(st *state.Store, cmd Command, index uint64) any {
	h := st.History
	switch r := cmd.(type) {
	case *UpdateDesiredStateRequest:
		if st.DesiredSeq+1 != r.Seq {
			return fmt.Errorf("%w: it is update %d, the store holds %d", ErrOutOfSequence, r.Seq, st.DesiredSeq)
		}
		var (
			tx *state.Tx
			tr []state.Transition
		)
		if h != nil {
			noteHistory(h, r.History, index)
			tx = state.TxOfUpdate(st, &r.Update)
			tr = state.RemovedTransitions(st, &r.Update, index, timeOf(r.History))
		}
		st.ApplyDesired(&r.Update, index)
		if tx != nil {
			recordUpdate(h, tx, r.History, index)
			if len(tr) > 0 {
				h.AppendTransitions(tr, timeOf(r.History))
			}
		}
		return nil
	case *AgentConnectedRequest:
		st.AgentConnected(r.Name, r.Tags)
		return nil
	case *AgentGoneRequest:
		var tr []state.Transition
		if h != nil {
			noteHistory(h, r.History, index)
			tr = state.TransitionsOf(st, disconnected(st, r.Name), index, timeOf(r.History))
		}
		resp := &AgentGoneResponse{Disconnected: st.AgentGone(r.Name)}
		if h != nil && len(tr) > 0 {
			recordDecision(h, "agent "+r.Name+" disconnected", tr, r.History, index)
			h.AppendTransitions(tr, timeOf(r.History))
		}
		return resp
	case *WorkloadReportsRequest:
		var (
			stale []string
			fresh []state.InstanceName
			trans []state.Transition
		)
		if h != nil {
			noteHistory(h, r.History, index)
		}
		for _, rep := range r.Reports {
			n := len(fresh)
			// A set of the report's new instances beside the list that
			// keeps their order: a report of many new instances cost
			// the square of their number (seconds for tens of thousands).
			var seen map[state.InstanceName]bool
			for _, ws := range rep.States {
				if _, ok := st.States.Get(ws.Instance); ok || seen[ws.Instance] {
					continue
				}
				if seen == nil {
					seen = map[state.InstanceName]bool{}
				}
				seen[ws.Instance] = true
				fresh = append(fresh, ws.Instance)
			}
			var tr []state.Transition
			if h != nil {
				tr = state.TransitionsOf(st, rep.States, index, timeOf(r.History))
			}
			if !st.ApplyReport(rep.Agent, rep.Mark, rep.States) {
				stale = append(stale, rep.Agent)
				fresh = fresh[:n]
				continue
			}
			if h != nil {
				recordRepairs(h, rep.Agent, tr, r.History, index)
			}
			trans = append(trans, tr...)
		}
		if h != nil && len(trans) > 0 {
			if r.History != nil && r.History.Decision != "" {
				recordDecision(h, r.History.Decision, trans, r.History, index)
			}
			h.AppendTransitions(trans, timeOf(r.History))
		}
		if stale != nil || fresh != nil {
			return &WorkloadReportsResponse{Stale: stale, New: fresh}
		}
		return nil
	case *SetAgentModeRequest:
		executeAgentMode(st, r, index)
		return nil
	case *PlacementRequest:
		executePlacement(st, r, index)
		return nil
	case *HistoryNotesRequest:
		if h != nil {
			noteHistory(h, &r.History, index)
		}
		return nil
	case *ProblemsChangedRequest:
		return applyProblems(st, r)
	case *LockObjectsRequest:
		if err := st.TakeLocks(r.Objects, r.Owner, r.Reason, r.NowMs, r.ExpiresMs); err != nil {
			return err
		}
		return nil
	case *UnlockObjectsRequest:
		if err := st.ReleaseLocks(r.Objects, r.Owner, r.NowMs, r.Force); err != nil {
			return err
		}
		return nil
	case *ReplicaRemovalRequest:
		if r.Forget {
			st.ForgetRemoval(r.ID)
		} else {
			if r.Incarnation != 0 {
				st.RecordRemoval(r.ID, r.Incarnation, index)
			}
			st.RevokeReplica(r.ID, r.Certs, index, r.TimeMs)
		}
		return nil
	case *ReplicaCertificateRequest:
		st.RecordReplicaCert(r.ID, r.Cert)
		return nil
	case *SetClusterVersionRequest:
		st.SetClusterVersion(r.Version)
		return nil
	}
	// Only a programming error on the leader gets here: a committed entry
	// always decodes into one of the commands above.
	return fmt.Errorf("%w: %T is not a command", ErrBadCommand, cmd)
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
	f.clusterVersion.Store(s.ClusterVersion)
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
