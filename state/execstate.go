package state

import "fmt"

// ExecState is the top level of an execution state.
type ExecState string

// Execution states, spelled as Ankaios writes them in YAML and tables.
const (
	StateAgentDisconnected ExecState = "AgentDisconnected"
	StatePending           ExecState = "Pending"
	StateRunning           ExecState = "Running"
	StateStopping          ExecState = "Stopping"
	StateSucceeded         ExecState = "Succeeded"
	StateFailed            ExecState = "Failed"
	StateNotScheduled      ExecState = "NotScheduled"
	StateRemoved           ExecState = "Removed"
)

// Substates, spelled as Ankaios writes them. States with a single value
// (AgentDisconnected, NotScheduled, Removed) repeat the state's name.
const (
	SubInitial            = "Initial"
	SubWaitingToStart     = "WaitingToStart"
	SubStarting           = "Starting"
	SubStartingFailed     = "StartingFailed"
	SubOk                 = "Ok"
	SubStopping           = "Stopping"
	SubWaitingToStop      = "WaitingToStop"
	SubRequestedAtRuntime = "RequestedAtRuntime"
	SubDeleteFailed       = "DeleteFailed"
	SubExecFailed         = "ExecFailed"
	SubUnknown            = "Unknown"
	SubLost               = "Lost"
)

// validSubStates lists the substates each state allows.
var validSubStates = map[ExecState][]string{
	StateAgentDisconnected: {string(StateAgentDisconnected)},
	StatePending:           {SubInitial, SubWaitingToStart, SubStarting, SubStartingFailed},
	StateRunning:           {SubOk},
	StateStopping:          {SubStopping, SubWaitingToStop, SubRequestedAtRuntime, SubDeleteFailed},
	StateSucceeded:         {SubOk},
	StateFailed:            {SubExecFailed, SubUnknown, SubLost},
	StateNotScheduled:      {string(StateNotScheduled)},
	StateRemoved:           {string(StateRemoved)},
}

// ExecutionState is the state of one workload instance.
// Its json tags are the keys of snapshot records: frozen (see Rendered).
type ExecutionState struct {
	State          ExecState `json:"State"`
	SubState       string    `json:"SubState"`
	AdditionalInfo string    `json:"AdditionalInfo"`
}

// Constructors for the states the server itself sets.
var (
	PendingInitial    = ExecutionState{State: StatePending, SubState: SubInitial}
	NotScheduled      = ExecutionState{State: StateNotScheduled, SubState: string(StateNotScheduled)}
	AgentDisconnected = ExecutionState{State: StateAgentDisconnected, SubState: string(StateAgentDisconnected)}
	Removed           = ExecutionState{State: StateRemoved, SubState: string(StateRemoved)}
	RunningOk         = ExecutionState{State: StateRunning, SubState: SubOk}
	SucceededOk       = ExecutionState{State: StateSucceeded, SubState: SubOk}
)

// Validate checks that the substate belongs to the state.
func (e ExecutionState) Validate() error {
	subs, ok := validSubStates[e.State]
	if !ok {
		return fmt.Errorf("unknown execution state %q", e.State)
	}
	for _, s := range subs {
		if s == e.SubState {
			return nil
		}
	}
	return fmt.Errorf("substate %q is not a substate of %s", e.SubState, e.State)
}

// Is reports whether e has the given state and substate.
func (e ExecutionState) Is(s ExecState, sub string) bool { return e.State == s && e.SubState == sub }

// IsRemoved reports whether the instance is gone.
func (e ExecutionState) IsRemoved() bool { return e.State == StateRemoved }

// IsPendingInitial reports whether no agent has picked the instance up yet.
func (e ExecutionState) IsPendingInitial() bool { return e.Is(StatePending, SubInitial) }

// IsNotPendingNorRunning is the test of DEL_COND_NOT_PENDING_NOR_RUNNING.
func (e ExecutionState) IsNotPendingNorRunning() bool {
	return e.State != StatePending && e.State != StateRunning
}

// Short is the table form: "Running(Ok)", "AgentDisconnected".
func (e ExecutionState) Short() string {
	switch e.State {
	case StateAgentDisconnected, StateNotScheduled, StateRemoved:
		return string(e.State)
	}
	return fmt.Sprintf("%s(%s)", e.State, e.SubState)
}

// String is the Ankaios display form, with additional info when present.
func (e ExecutionState) String() string {
	if e.AdditionalInfo != "" {
		return fmt.Sprintf("%s: '%s'", e.Short(), e.AdditionalInfo)
	}
	return e.Short()
}
