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
	// WorkloadStatesType records workload state reports, batched.
	WorkloadStatesType MessageType = 5
)

// IgnoreUnknownTypeFlag marks a command that an older replica may skip if
// it does not know the type, instead of stopping.
const IgnoreUnknownTypeFlag MessageType = 128

// typeNames is the name of each type, for logs and metrics.
var typeNames = map[MessageType]string{
	UpdateDesiredStateType: "UpdateDesiredState",
	AgentConnectedType:     "AgentConnected",
	AgentGoneType:          "AgentGone",
	AgentLoadType:          "AgentLoad",
	WorkloadStatesType:     "WorkloadStates",
}

func (t MessageType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// UpdateDesiredStateRequest is the body of UpdateDesiredStateType.
type UpdateDesiredStateRequest struct {
	Update state.DesiredUpdate
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

// Encode writes the type byte, then the body.
func Encode(t MessageType, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 1+len(b))
	out[0] = byte(t)
	copy(out[1:], b)
	return out, nil
}

func decode(buf []byte, v any) {
	if err := json.Unmarshal(buf, v); err != nil {
		// A committed entry that does not decode means a bug or a corrupt
		// log; applying anything else would fork the replicas.
		panic(fmt.Sprintf("fsm: failed to decode committed entry: %v", err))
	}
}
