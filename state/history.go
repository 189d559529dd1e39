package state

import (
	"slices"
)

// The transaction history (docs/history.md): every accepted update,
// every server-side decision and every rejected request is a transaction
// with a sequence number, and every change of a workload instance's
// execution state a transition. Both are replicated: the FSM appends
// them while it applies the entries, from what the leader put into them
// (time, requester, masks, limits) and from the store before and after,
// so every replica holds the same history. They are bounded by count,
// by age and by an estimate of their size in a snapshot, with limits that
// travel in the entries too.

// TxKind says what made a transaction.
type TxKind string

// Transaction kinds, as the API and the CLI spell them.
const (
	// TxUpdate is an accepted UpdateState (or the startup manifest).
	TxUpdate TxKind = "Update"
	// TxRejected is a request the server refused; it changed nothing.
	TxRejected TxKind = "Rejected"
	// TxDecision is a change the server made itself: an agent gone, the
	// states of an agent's previous life, states unconfirmed after a
	// cluster start.
	TxDecision TxKind = "Decision"
	// TxRepair is an agent's drift repair: a report whose states carry a
	// DriftPrefix reason (an instance removed or replaced behind the
	// agent's back, or an unknown one it removed).
	TxRepair TxKind = "Repair"
	// TxPlacement is a new layout of the placed workloads the leader's
	// allocator decided (docs/placement.md): each instance placed is an
	// OpAdded, each moved off an OpDeleted.
	TxPlacement TxKind = "Placement"
	// TxAgentMode is an operator's change of an agent's mode.
	TxAgentMode TxKind = "AgentMode"
)

// DriftPrefix starts the additionalInfo of every state an agent's drift
// repair reports (docs/agent.md, "Drift repair"); the FSM records such a
// report as a TxRepair transaction.
const DriftPrefix = "drift: "

// TxOp is what a transaction did to a workload or a config item.
type TxOp string

// Operations on workloads and config items.
const (
	OpAdded   TxOp = "Added"
	OpUpdated TxOp = "Updated"
	OpDeleted TxOp = "Deleted"
	// OpStates is a decision that changed instances' states only.
	OpStates TxOp = "States"
)

// Tx is one transaction. Records are immutable once appended: readers
// and clones share them.
type Tx struct {
	// Seq numbers the transactions of the cluster, 1, 2, 3, ...: the
	// Raft index is not unique, since one entry carries a batch.
	Seq uint64 `json:"s"`
	// Index is the Raft index of the entry that carried it.
	Index uint64 `json:"i"`
	// TimeMs is when the leader decided it, in Unix milliseconds by the
	// leader's clock.
	TimeMs int64  `json:"t"`
	Kind   TxKind `json:"k"`
	// Requester is who asked: the connection name the server knows (an
	// agent, a CLI connection, a commander), "startup-manifest", or
	// "server" for a decision.
	Requester string `json:"r,omitempty"`
	// UpdateMask is the request's update mask.
	UpdateMask []string `json:"m,omitempty"`
	// Reason says why a request was rejected, or what a decision was.
	Reason string `json:"why,omitempty"`
	// Count is how many equal rejections this record stands for (they
	// are conflated on the leader); zero for one.
	Count     uint32       `json:"n,omitempty"`
	Workloads []TxWorkload `json:"w,omitempty"`
	Configs   []TxConfig   `json:"c,omitempty"`
	// APIVersion is the new apiVersion if the update changed it.
	APIVersion string `json:"v,omitempty"`
}

// TxWorkload is what a transaction did to one workload.
type TxWorkload struct {
	Name string `json:"n"`
	Op   TxOp   `json:"o"`
	// Instance is the instance after the transaction (added, updated);
	// OldInstance the one before (updated, deleted), both in the Ankaios
	// form name.id.agent.
	Instance    string `json:"i,omitempty"`
	OldInstance string `json:"p,omitempty"`
	// Changes are the fields that changed, with their values before and
	// after (shortened); for an added workload the fields it sets.
	Changes []FieldChange `json:"f,omitempty"`
	// States are the instances' states a decision set.
	States []string `json:"st,omitempty"`
}

// FieldChange is one changed field of a workload. A value longer than
// maxHistoryValue is cut and says how long it was.
type FieldChange struct {
	Field string `json:"f"`
	Old   string `json:"o,omitempty"`
	New   string `json:"n,omitempty"`
}

// TxConfig is what a transaction did to one config item.
type TxConfig struct {
	Key string `json:"k"`
	Op  TxOp   `json:"o"`
}

// Transition is one execution-state change of a workload instance, as a
// committed report (or a decision) set it.
type Transition struct {
	Index    uint64         `json:"i"`
	TimeMs   int64          `json:"t"`
	Instance InstanceName   `json:"Instance"`
	State    ExecutionState `json:"State"`
}

// HistoryLimits bound the history. The leader puts its own into the
// entries (its flags); the FSM keeps the last it applied, so that every
// replica prunes the same. Zero means the default.
type HistoryLimits struct {
	// MaxEntries bounds the transactions, and separately the transitions.
	MaxEntries uint32 `json:"n,omitempty"`
	// MaxAgeMs drops records older than this before the newest record.
	MaxAgeMs uint64 `json:"a,omitempty"`
	// MaxBytes bounds the estimated snapshot size of both lists together.
	MaxBytes uint64 `json:"b,omitempty"`
}

// Default history limits: for a vehicle, a week of changes in at most
// 256 KiB of snapshot, which keeps a snapshot small next to the Raft log
// it replaces (docs/history.md).
const (
	DefaultHistoryMaxEntries = 1000
	DefaultHistoryMaxAgeMs   = 7 * 24 * 3600 * 1000
	DefaultHistoryMaxBytes   = 256 << 10
)

// Effective fills the zero limits with the defaults.
func (l HistoryLimits) Effective() HistoryLimits {
	if l.MaxEntries == 0 {
		l.MaxEntries = DefaultHistoryMaxEntries
	}
	if l.MaxAgeMs == 0 {
		l.MaxAgeMs = DefaultHistoryMaxAgeMs
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultHistoryMaxBytes
	}
	return l
}

// History is the replicated transaction history and the execution-state
// transitions. It changes only by appending (and pruning from the
// front); the records are shared by clones.
type History struct {
	Txs         []*Tx
	Transitions []Transition
	// Limits are the last limits an entry carried.
	Limits HistoryLimits
	// LastSeq is the Seq of the newest transaction ever appended, kept
	// when the transaction itself is pruned.
	LastSeq uint64
	// bytes is the estimated size of Txs and Transitions.
	bytes uint64
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Clone returns a copy that shares the immutable records.
func (h *History) Clone() *History {
	if h == nil {
		return nil
	}
	c := *h
	c.Txs = slices.Clone(h.Txs)
	c.Transitions = slices.Clone(h.Transitions)
	return &c
}

// Bytes is the estimated snapshot size of the records.
func (h *History) Bytes() uint64 { return h.bytes }

// SetLimits takes limits an entry carried; zero limits change nothing.
func (h *History) SetLimits(l HistoryLimits) {
	if l != (HistoryLimits{}) {
		h.Limits = l
	}
}

// AppendTx numbers a transaction, appends it and prunes.
func (h *History) AppendTx(tx *Tx) {
	h.LastSeq++
	tx.Seq = h.LastSeq
	h.Txs = append(h.Txs, tx)
	h.bytes += tx.size()
	h.prune(tx.TimeMs)
}

// AppendTransitions appends transitions and prunes.
func (h *History) AppendTransitions(ts []Transition, nowMs int64) {
	for _, t := range ts {
		h.Transitions = append(h.Transitions, t)
		h.bytes += t.size()
	}
	h.prune(nowMs)
}

// Restore appends a record read from a snapshot, without pruning: the
// snapshot holds what the writer kept.
func (h *History) Restore(tx *Tx, tr *Transition) {
	if tx != nil {
		h.Txs = append(h.Txs, tx)
		h.bytes += tx.size()
		h.LastSeq = max(h.LastSeq, tx.Seq)
	}
	if tr != nil {
		h.Transitions = append(h.Transitions, *tr)
		h.bytes += tr.size()
	}
}

// prune drops, oldest first, what is over the count, older than the age
// before nowMs (the time of the record just appended, decided by the
// leader), and then whatever is over the byte budget, taking from the
// list whose oldest record is older.
func (h *History) prune(nowMs int64) {
	l := h.Limits.Effective()
	cut := nowMs - int64(l.MaxAgeMs)
	nTx := 0
	for nTx < len(h.Txs) && (len(h.Txs)-nTx > int(l.MaxEntries) || h.Txs[nTx].TimeMs < cut) {
		h.bytes -= h.Txs[nTx].size()
		nTx++
	}
	nTr := 0
	for nTr < len(h.Transitions) && (len(h.Transitions)-nTr > int(l.MaxEntries) || h.Transitions[nTr].TimeMs < cut) {
		h.bytes -= h.Transitions[nTr].size()
		nTr++
	}
	for h.bytes > l.MaxBytes && (nTx < len(h.Txs) || nTr < len(h.Transitions)) {
		if nTr == len(h.Transitions) || nTx < len(h.Txs) && h.Txs[nTx].TimeMs <= h.Transitions[nTr].TimeMs {
			h.bytes -= h.Txs[nTx].size()
			nTx++
		} else {
			h.bytes -= h.Transitions[nTr].size()
			nTr++
		}
	}
	if nTx > 0 {
		clear(h.Txs[:nTx])
		h.Txs = h.Txs[nTx:]
	}
	if nTr > 0 {
		h.Transitions = h.Transitions[nTr:]
	}
}

// Record overheads in the size estimate: the JSON keys, punctuation and
// numbers of a snapshot record, measured on typical records and rounded
// up (fsm's snapshot test checks that the estimate is not below the
// bytes written).
const (
	txOverhead         = 64
	txWorkloadOverhead = 32
	txChangeOverhead   = 24
	txConfigOverhead   = 16
	transitionOverhead = 128
)

// size estimates the snapshot bytes of a transaction.
func (tx *Tx) size() uint64 {
	n := txOverhead + len(tx.Kind) + len(tx.Requester) + len(tx.Reason) + len(tx.APIVersion)
	for _, m := range tx.UpdateMask {
		n += len(m) + 3
	}
	for _, w := range tx.Workloads {
		n += txWorkloadOverhead + len(w.Name) + len(w.Op) + len(w.Instance) + len(w.OldInstance)
		for _, c := range w.Changes {
			n += txChangeOverhead + jsonLen(c.Field) + jsonLen(c.Old) + jsonLen(c.New)
		}
		for _, s := range w.States {
			n += len(s) + 3
		}
	}
	for _, c := range tx.Configs {
		n += txConfigOverhead + len(c.Key) + len(c.Op)
	}
	return uint64(n)
}

// jsonLen bounds the JSON length of a string: control characters and
// quotes are escaped, up to six bytes each.
func jsonLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			n += 5
		}
	}
	return n
}

// size estimates the snapshot bytes of a transition.
func (t Transition) size() uint64 {
	i := t.Instance
	return uint64(transitionOverhead + len(i.WorkloadName) + len(i.AgentName) + len(i.ID) +
		len(t.State.State) + len(t.State.SubState) + jsonLen(t.State.AdditionalInfo))
}

// Since returns the transactions after seq that touch workload (any
// when empty), oldest first, at most limit of them (all when limit is
// zero), so that a reader pages on with the last one's Seq.
func (h *History) Since(seq uint64, workload string, limit int) []*Tx {
	var out []*Tx
	for _, tx := range h.Txs {
		if limit > 0 && len(out) == limit {
			break
		}
		if tx.Seq > seq && (workload == "" || tx.Touches(workload)) {
			out = append(out, tx)
		}
	}
	return out
}

// Get returns the transaction numbered seq, if it is still kept.
func (h *History) Get(seq uint64) (*Tx, bool) {
	i, ok := slices.BinarySearchFunc(h.Txs, seq, func(tx *Tx, s uint64) int {
		switch {
		case tx.Seq < s:
			return -1
		case tx.Seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, false
	}
	return h.Txs[i], true
}

// Touches reports whether the transaction changed the workload.
func (tx *Tx) Touches(workload string) bool {
	for _, w := range tx.Workloads {
		if w.Name == workload {
			return true
		}
	}
	return false
}

// LastReported is the newest state the history keeps of an instance,
// passing over the states the server sets while no agent confirms them
// (Pending(Initial) after a cluster start, AgentDisconnected): after
// such a state an agent reports what it reported before, which is no
// new event. False when the history keeps none (never one, or pruned).
func (h *History) LastReported(inst InstanceName) (ExecutionState, bool) {
	for i := len(h.Transitions) - 1; i >= 0; i-- {
		t := &h.Transitions[i]
		if t.Instance != inst || t.State.IsPendingInitial() || t.State == AgentDisconnected {
			continue
		}
		return t.State, true
	}
	return ExecutionState{}, false
}

// TransitionsOf returns the transitions of a workload's instances, oldest
// first.
func (h *History) TransitionsOf(workload string) []Transition {
	var out []Transition
	for _, t := range h.Transitions {
		if t.Instance.WorkloadName == workload {
			out = append(out, t)
		}
	}
	return out
}
