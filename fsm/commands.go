package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// MessageType is the first byte of every Raft log entry Grapnel writes.
// Values are never renumbered or reused: a retired type keeps its number
// with a Deprecated comment, so old logs still decode.
type MessageType uint8

// Command types.
const (
	// UpdateDesiredStateType applies an accepted UpdateState.
	UpdateDesiredStateType MessageType = 1
	// AgentConnectedType records an agent's hello.
	AgentConnectedType MessageType = 2
	// AgentGoneType records an agent's disconnection.
	AgentGoneType MessageType = 3
	// AgentLoadType records agents' load reports, batched.
	AgentLoadType MessageType = 4
	// WorkloadStatesType records workload state reports, batched, without
	// report marks. Kept for logs written before WorkloadReportsType.
	WorkloadStatesType MessageType = 5
	// UpdateDesiredStateSeqType applies an accepted UpdateState that the
	// leader planned on top of the desired state numbered Seq-1. It is
	// refused when the store is elsewhere, so that a pipelined update never
	// builds on an earlier one that failed. A replica that does not know
	// the type stops instead of applying it unchecked.
	UpdateDesiredStateSeqType MessageType = 6
	// WorkloadReportsType records conflated workload state reports of
	// several agents with their report marks; a report older than the
	// agent's stored mark is dropped.
	WorkloadReportsType MessageType = 7
	// UpdateDesiredStatePackedType is UpdateDesiredStateSeqType with a
	// msgpack body in which a rendered workload that is a copy of its
	// spec (it maps no config) is left out and rebuilt from the spec on
	// apply (see packed.go): the body is about a third as long and decodes
	// about three times faster than JSON, on every replica. A replica that does
	// not know the type stops instead of applying it unchecked.
	UpdateDesiredStatePackedType MessageType = 8
	// BatchType carries several commands of the other types in one entry
	// (see batch.go): the leader's group commit hands Raft each batch as
	// one entry, so Raft stores, replicates and applies one entry instead
	// of many. A replica that does not know the type stops instead of
	// applying it unchecked.
	BatchType MessageType = 9
)

// IgnoreUnknownTypeFlag marks a command that an older replica may skip if
// it does not know the type, instead of stopping.
const IgnoreUnknownTypeFlag MessageType = 128

// typeNames is the name of each type, for logs and metrics.
var typeNames = map[MessageType]string{
	UpdateDesiredStateType:       "UpdateDesiredState",
	AgentConnectedType:           "AgentConnected",
	AgentGoneType:                "AgentGone",
	AgentLoadType:                "AgentLoad",
	WorkloadStatesType:           "WorkloadStates",
	UpdateDesiredStateSeqType:    "UpdateDesiredStateSeq",
	WorkloadReportsType:          "WorkloadReports",
	UpdateDesiredStatePackedType: "UpdateDesiredStatePacked",
	BatchType:                    "Batch",
}

func (t MessageType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// UpdateDesiredStateRequest is the body of UpdateDesiredStateType,
// UpdateDesiredStateSeqType and UpdateDesiredStatePackedType.
type UpdateDesiredStateRequest struct {
	Update state.DesiredUpdate
	// Seq is the store's DesiredSeq once the update is applied; only
	// UpdateDesiredStateSeqType checks it.
	Seq uint64 `json:",omitempty"`
}

// AgentConnectedRequest is the body of AgentConnectedType.
type AgentConnectedRequest struct {
	Name string
	Tags map[string]string
}

// AgentGoneRequest is the body of AgentGoneType.
type AgentGoneRequest struct {
	Name string
}

// AgentLoad is one agent's load report.
type AgentLoad struct {
	Name       string
	CPUUsage   uint32
	FreeMemory uint64
}

// AgentLoadRequest is the body of AgentLoadType.
type AgentLoadRequest struct {
	Loads []AgentLoad
}

// WorkloadStatesRequest is the body of WorkloadStatesType.
type WorkloadStatesRequest struct {
	States []state.WorkloadState
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
}

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

// Encode writes the type byte, then the body: packed for
// UpdateDesiredStatePackedType, JSON for every other type.
func Encode(t MessageType, body any) ([]byte, error) {
	if t == UpdateDesiredStatePackedType {
		return encodePacked(t, body)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 1+len(b))
	out[0] = byte(t)
	copy(out[1:], b)
	return out, nil
}
