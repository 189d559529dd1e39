package fsm

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// FSM applies committed commands to the replicated store.
type FSM struct {
	// mu guards store and applied. Apply takes it for writing; readers
	// take it through Read.
	mu      sync.RWMutex
	store   *state.Store
	applied uint64

	// observer, if set, is called after each apply with the command type
	// and the store, still under the write lock. The server uses it to
	// learn of changes it did not propose itself.
	observer func(t MessageType, index uint64)
}

// New returns an FSM over an empty store.
func New() *FSM { return &FSM{store: state.NewStore()} }

// SetObserver installs a callback run after every applied command. It must
// not block.
func (f *FSM) SetObserver(fn func(t MessageType, index uint64)) {
	f.mu.Lock()
	f.observer = fn
	f.mu.Unlock()
}

// Read runs fn with the store under the read lock. fn must not keep
// references to the mutable maps (States, Agents) after it returns.
func (f *FSM) Read(fn func(s *state.Store, applied uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.store, f.applied)
}

// AppliedIndex is the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// Apply implements raft.FSM. It returns nil or an error value; business
// rejections happen on the leader before proposing, so an error here is
// an unknown command type marked ignorable.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = l.Index
	t := MessageType(l.Data[0])
	resp := f.applyLocked(t, l.Data[1:], l.Index)
	if f.observer != nil {
		f.observer(t, l.Index)
	}
	return resp
}

func (f *FSM) applyLocked(t MessageType, buf []byte, index uint64) any {
	switch t {
	case UpdateDesiredStateType:
		var r UpdateDesiredStateRequest
		decode(buf, &r)
		f.store.ApplyDesired(&r.Update, index)
	case AgentConnectedType:
		var r AgentConnectedRequest
		decode(buf, &r)
		f.store.AgentConnected(r.Name, r.Tags)
	case AgentGoneType:
		var r AgentGoneRequest
		decode(buf, &r)
		f.store.AgentGone(r.Name)
	case AgentLoadType:
		var r AgentLoadRequest
		decode(buf, &r)
		for _, l := range r.Loads {
			f.store.AgentLoad(l.Name, l.CPUUsage, l.FreeMemory)
		}
	case WorkloadStatesType:
		var r WorkloadStatesRequest
		decode(buf, &r)
		f.store.ApplyStates(r.States)
	default:
		if t&IgnoreUnknownTypeFlag != 0 {
			return nil
		}
		panic(fmt.Sprintf("fsm: unknown command type %d", uint8(t)))
	}
	return nil
}

// Snapshot implements raft.FSM: it copies the store (Apply is blocked while
// it runs, so it only copies; encoding happens in Persist).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{store: f.store.Clone(), index: f.applied}, nil
}

// Restore implements raft.FSM: it decodes into a fresh store and swaps it
// in.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	s, index, err := ReadSnapshot(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.store = s
	f.applied = index
	f.mu.Unlock()
	return nil
}
