package fsm

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/state"
)

// MessageType is the first byte of every Raft log entry Grapnel writes.
// Values are never renumbered or reused: a retired type keeps its number
// with a Deprecated comment and its entry in the command table (commands).
type MessageType uint8

// Command types. Every body is a protobuf message of fsm/proto/commands.proto,
// marshalled deterministically (codec.go). The bodies of types 2, 3, 7 and
// 8 were JSON or msgpack before that; no deployment held logs of them
// then, so the encoding changed under the same numbers. Types 1, 4, 5 and
// 6 were retired at the same time: no version writes them, and an entry
// of one of them is refused at the transport (CheckType) and halts the
// FSM if it was committed all the same, naming it and why it was retired.
const (
	// UpdateDesiredStateType applied an unsequenced UpdateState.
	//
	// Deprecated: retired; UpdateDesiredStatePackedType replaces it.
	UpdateDesiredStateType MessageType = 1
	// AgentConnectedType records an agent's hello.
	AgentConnectedType MessageType = 2
	// AgentGoneType records an agent's disconnection.
	AgentGoneType MessageType = 3
	// AgentLoadType recorded agents' load reports.
	//
	// Deprecated: retired; agent load lives in the leader's memory and
	// is not replicated.
	AgentLoadType MessageType = 4
	// WorkloadStatesType recorded workload state reports without report
	// marks.
	//
	// Deprecated: retired; WorkloadReportsType replaces it.
	WorkloadStatesType MessageType = 5
	// UpdateDesiredStateSeqType applied a sequenced UpdateState as JSON.
	//
	// Deprecated: retired; UpdateDesiredStatePackedType replaces it.
	UpdateDesiredStateSeqType MessageType = 6
	// WorkloadReportsType records conflated workload state reports of
	// several agents with their report marks; a report older than the
	// agent's stored mark is dropped.
	WorkloadReportsType MessageType = 7
	// UpdateDesiredStatePackedType applies an accepted UpdateState that
	// the leader planned on top of the desired state numbered Seq-1. It is
	// refused when the store is elsewhere, so that a pipelined update
	// never builds on an earlier one that failed. A rendered workload that
	// is a copy of its spec (it maps no config) is left out of the body
	// and rebuilt from the spec on apply. A replica that does not know the
	// type stops instead of applying it unchecked.
	UpdateDesiredStatePackedType MessageType = 8
	// BatchType carries several commands of the other types in one entry
	// (see batch.go): the leader's group commit hands Raft each batch as
	// one entry, so Raft stores, replicates and applies one entry instead
	// of many. A replica that does not know the type stops instead of
	// applying it unchecked.
	BatchType MessageType = 9
	// HistoryNotesType records history with no change of state: rejected
	// requests that no other entry took along (docs/history.md). It
	// carries IgnoreUnknownTypeFlag: a replica that does not know it
	// skips it and only misses the records.
	HistoryNotesType MessageType = 10 | IgnoreUnknownTypeFlag
	// SetAgentModeType records an operator's mode for an agent (Active,
	// Maintenance, Disabled; docs/placement.md). A replica that does not
	// know it stops: skipping it would leave its allocator inputs apart.
	SetAgentModeType MessageType = 11
	// PlacementType records a new layout of the placed workloads, as the
	// leader's allocator decided it, and the states it sets. A replica
	// that does not know it stops instead of losing instances.
	PlacementType MessageType = 12
	// ProblemsChangedType records the problems of the problems view that
	// opened and closed (docs/problems.md, fsm/problems.go). It carries
	// IgnoreUnknownTypeFlag: a replica that does not know it skips it and
	// only misses the problems view.
	ProblemsChangedType MessageType = 13 | IgnoreUnknownTypeFlag
	// LockObjectsType takes or renews intent locks (docs/locks.md) at the
	// leader's time in the body. A replica that does not know it stops
	// instead of skipping it: a lock it skipped would be missing when it
	// leads.
	LockObjectsType MessageType = 14
	// UnlockObjectsType releases intent locks; a replica that does not
	// know it stops, as for LockObjectsType.
	UnlockObjectsType MessageType = 15
	// ReplicaRemovalType records an operator's removal of one run of a
	// replica, proposed before the configuration change that removes it,
	// or forgets it when an operator adds the replica back (state.
	// RemovedReplica). It carries IgnoreUnknownTypeFlag: a replica that
	// does not know it skips it and, when it leads, only forgets which
	// run was removed, as every replica did before.
	ReplicaRemovalType MessageType = 16 | IgnoreUnknownTypeFlag
	// ReplicaCertificateType records a certificate a replica of the
	// configuration showed the leader on the Raft port (state.
	// ReplicaCert), so that any later leader can revoke it when an
	// operator removes that replica. It carries IgnoreUnknownTypeFlag: a
	// replica that does not know it skips it and, when it leads, revokes
	// only what it saw itself.
	ReplicaCertificateType MessageType = 17 | IgnoreUnknownTypeFlag
	// SetClusterVersionType raises the cluster version
	// (state.ClusterVersion, docs/upgrade.md). A replica that does not
	// know the type stops instead of skipping it, and one that does not
	// know the version stops too: from this entry on the log may hold
	// formats it cannot read.
	SetClusterVersionType MessageType = 18
)

// IgnoreUnknownTypeFlag marks a command that an older replica may skip if
// it does not know the type, instead of stopping.
const IgnoreUnknownTypeFlag MessageType = 128

// commands is the one place each type is named, decoded and applied: a
// type this version knows has exactly one entry, retired types included
// (their numbers are never reused). Whether a replica that does not know
// a type may skip it is the number's own high bit (Skippable). To add a
// command, see docs/checklist-new-command.md.
var commands = map[MessageType]*command{
	UpdateDesiredStateType:       retiredAs("UpdateDesiredState", "replaced by UpdateDesiredStatePacked (8)"),
	AgentConnectedType:           live("AgentConnected", agentConnectedFromProto, executeAgentConnected),
	AgentGoneType:                live("AgentGone", agentGoneFromProto, executeAgentGone),
	AgentLoadType:                retiredAs("AgentLoad", "agent load is kept in the leader's memory, not replicated"),
	WorkloadStatesType:           retiredAs("WorkloadStates", "replaced by WorkloadReports (7)"),
	UpdateDesiredStateSeqType:    retiredAs("UpdateDesiredStateSeq", "replaced by UpdateDesiredStatePacked (8)"),
	WorkloadReportsType:          live("WorkloadReports", reportsFromProto, executeReports),
	UpdateDesiredStatePackedType: live("UpdateDesiredStatePacked", updateFromProto, executeUpdate),
	// A batch's commands are decoded and applied one by one (batch.go).
	BatchType:              {name: "Batch"},
	HistoryNotesType:       live("HistoryNotes", historyNotesFromProto, executeHistoryNotes),
	SetAgentModeType:       live("SetAgentMode", agentModeFromProto, executeAgentMode),
	PlacementType:          live("Placement", placementFromProto, executePlacement),
	ProblemsChangedType:    live("ProblemsChanged", problemsFromProto, executeProblems),
	LockObjectsType:        live("LockObjects", lockFromProto, executeLock),
	UnlockObjectsType:      live("UnlockObjects", unlockFromProto, executeUnlock),
	ReplicaRemovalType:     live("ReplicaRemoval", removalFromProto, executeRemoval).refreshing((*FSM).copyRevokedLocked),
	ReplicaCertificateType: live("ReplicaCertificate", certificateFromProto, executeCertificate),
	SetClusterVersionType: live("SetClusterVersion", clusterVersionFromProto, executeClusterVersion).
		refusing(tooNew).refreshing((*FSM).copyClusterVersionLocked),
}

// command is what this version knows of one MessageType.
type command struct {
	// name is the type's name in logs, metrics and --version.
	name string
	// retired says why no version writes the type any more; a retired
	// type has no decode nor execute, and an entry of it is refused.
	retired string
	// decode reads an entry's body into the type's request.
	decode func(body []byte) (Command, error)
	// execute applies a decoded request to a store at the entry's index
	// (see Execute).
	execute func(st *state.Store, c Command, index uint64) any
	// refuse, if set, says why this build must not apply a decoded
	// request: the FSM halts at the entry before any of it applies.
	refuse func(c Command) error
	// refresh, if set, updates what the FSM keeps of the store outside
	// its lock after a command of the type applied.
	refresh func(f *FSM)
}

// live is the entry of a type this version writes and applies: its body
// is the protobuf message M, read into the request R by from, which
// exec applies.
func live[P any, M interface {
	*P
	proto.Message
}, R Command](name string, from func(M) (R, error), exec func(*state.Store, R, uint64) any) *command {
	return &command{
		name: name,
		decode: func(body []byte) (Command, error) {
			m := M(new(P))
			if err := unmarshalOptions.Unmarshal(body, m); err != nil {
				return nil, err
			}
			r, err := from(m)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		execute: func(st *state.Store, c Command, index uint64) any {
			r, ok := c.(R)
			if !ok {
				return fmt.Errorf("%w: %T is not a %s command", ErrBadCommand, c, name)
			}
			return exec(st, r, index)
		},
	}
}

// retiredAs is the entry of a retired type: why no version writes it.
func retiredAs(name, why string) *command { return &command{name: name, retired: why} }

func (c *command) refusing(fn func(Command) error) *command { c.refuse = fn; return c }

func (c *command) refreshing(fn func(*FSM)) *command { c.refresh = fn; return c }

// lookup is the entry of type t for an entry to be applied: nil for an
// unknown type a replica may skip, and an error naming the type for an
// unknown one it may not skip or a retired one.
func lookup(t MessageType) (*command, error) {
	c, ok := commands[t]
	switch {
	case ok && c.retired != "":
		return nil, fmt.Errorf("%w: %d (%s) is retired: %s", ErrUnknownType, uint8(t), c.name, c.retired)
	case ok:
		return c, nil
	case t.Skippable():
		return nil, nil
	}
	return nil, fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
}

// MessageTypes lists every entry type this version knows, retired ones
// included, by number (internal/formats shows them in --version).
func MessageTypes() []MessageType {
	return slices.Sorted(maps.Keys(commands))
}

// Skippable reports whether a replica that does not know t skips it
// instead of stopping (IgnoreUnknownTypeFlag).
func (t MessageType) Skippable() bool { return t&IgnoreUnknownTypeFlag != 0 }

// Retired says why no version writes t any more, and whether it is
// retired: an entry of it is refused, and halts the FSM if committed.
func (t MessageType) Retired() (string, bool) {
	if c, ok := commands[t]; ok && c.retired != "" {
		return c.retired, true
	}
	return "", false
}

func (t MessageType) String() string {
	if c, ok := commands[t]; ok {
		return c.name
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// Command is the body of one entry. The type byte comes from the body, so
// the two cannot disagree; Encode writes both, Decode returns the body
// Apply executes.
type Command interface {
	// Type is the entry's type byte.
	Type() MessageType
	// message is the body's protobuf form (codec.go).
	message() (proto.Message, error)
}

// UpdateDesiredStateRequest is the body of UpdateDesiredStatePackedType.
type UpdateDesiredStateRequest struct {
	Update state.DesiredUpdate
	// Seq is the store's DesiredSeq once the update is applied.
	Seq uint64
	// History is the leader's part of the transaction; nil in entries
	// written before the history existed.
	History *HistoryMeta
}

// HistoryMeta is what the leader decided for the history records a
// command adds: the time, the requester, the masks, the limits, and the
// rejections that ride along (docs/history.md).
type HistoryMeta struct {
	TimeMs     int64
	Requester  string
	UpdateMask []string
	Limits     state.HistoryLimits
	Rejections []Rejection
	// Decision names a change the server made itself.
	Decision string
}

// Rejection is a refused request, or Count equal ones.
type Rejection struct {
	TimeMs     int64
	Requester  string
	UpdateMask []string
	Reason     string
	Count      uint32
}

// HistoryNotesRequest is the body of HistoryNotesType.
type HistoryNotesRequest struct {
	History HistoryMeta
}

// AgentConnectedRequest is the body of AgentConnectedType.
type AgentConnectedRequest struct {
	Name string
	Tags map[string]string
}

// AgentGoneRequest is the body of AgentGoneType.
type AgentGoneRequest struct {
	Name    string
	History *HistoryMeta
}

// AgentReport is the conflated state report of one agent: the newest
// state of each instance it reported and the mark of its newest report.
type AgentReport struct {
	Agent  string
	Mark   state.ReportMark
	States []state.WorkloadState
}

// WorkloadReportsRequest is the body of WorkloadReportsType.
type WorkloadReportsRequest struct {
	Reports []AgentReport
	History *HistoryMeta
}

// SetAgentModeRequest is the body of SetAgentModeType.
type SetAgentModeRequest struct {
	Agent   string
	Mode    state.AgentMode
	History *HistoryMeta
}

// PlacementRequest is the body of PlacementType. History.Decision says
// what made the leader allocate (an agent gone, a mode, an update).
type PlacementRequest struct {
	Update  state.PlacementUpdate
	History *HistoryMeta
}

// Type implements Command.
func (*SetAgentModeRequest) Type() MessageType { return SetAgentModeType }

// Type implements Command.
func (*PlacementRequest) Type() MessageType { return PlacementType }

// LockObjectsRequest is the body of LockObjectsType: Owner locks Objects
// from NowMs to ExpiresMs, the leader's clock; the locks expired at NowMs
// are dropped first. Refused (nothing changes) if another owner holds
// one of them at NowMs.
type LockObjectsRequest struct {
	Objects          []string
	Owner, Reason    string
	NowMs, ExpiresMs int64
}

// UnlockObjectsRequest is the body of UnlockObjectsType: Owner releases
// its locks on Objects, another's only with Force; the locks expired at
// NowMs are dropped first.
type UnlockObjectsRequest struct {
	Objects []string
	Owner   string
	NowMs   int64
	Force   bool
}

// ReplicaRemovalRequest is the body of ReplicaRemovalType: run
// Incarnation of replica ID was removed, or (Forget) its record ends. A
// removal revokes Certs and every certificate recorded for ID; TimeMs is
// the leader's time, by which expired revocations are dropped.
type ReplicaRemovalRequest struct {
	ID          string
	Incarnation uint64
	Forget      bool
	Certs       []state.ReplicaCert
	TimeMs      int64
}

// Type implements Command.
func (*ReplicaRemovalRequest) Type() MessageType { return ReplicaRemovalType }

// ReplicaCertificateRequest is the body of ReplicaCertificateType:
// replica ID showed certificate Cert.
type ReplicaCertificateRequest struct {
	ID   string
	Cert state.ReplicaCert
}

// Type implements Command.
func (*ReplicaCertificateRequest) Type() MessageType { return ReplicaCertificateType }

// SetClusterVersionRequest is the body of SetClusterVersionType.
type SetClusterVersionRequest struct {
	Version uint32
}

// Type implements Command.
func (*SetClusterVersionRequest) Type() MessageType { return SetClusterVersionType }

// Type implements Command.
func (*LockObjectsRequest) Type() MessageType { return LockObjectsType }

// Type implements Command.
func (*UnlockObjectsRequest) Type() MessageType { return UnlockObjectsType }

// Type implements Command.
func (*UpdateDesiredStateRequest) Type() MessageType { return UpdateDesiredStatePackedType }

// Type implements Command.
func (*AgentConnectedRequest) Type() MessageType { return AgentConnectedType }

// Type implements Command.
func (*AgentGoneRequest) Type() MessageType { return AgentGoneType }

// Type implements Command.
func (*WorkloadReportsRequest) Type() MessageType { return WorkloadReportsType }

// Type implements Command.
func (*HistoryNotesRequest) Type() MessageType { return HistoryNotesType }

// WorkloadReportsResponse is what applying a WorkloadReportsType entry
// returns when it dropped stale reports or created states: the agents
// whose report was older than the stored mark, and the instances that had
// no state before the entry. Events call a state added, not updated, when
// its instance had none (as Ankaios does). Nothing is returned when
// neither happened.
type WorkloadReportsResponse struct {
	Stale []string
	New   []state.InstanceName
}

// AgentGoneResponse is what applying an AgentGoneType entry returns: the
// states it turned AgentDisconnected.
type AgentGoneResponse struct {
	Disconnected []state.WorkloadState
}
