package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// InstanceName identifies one instance of a workload: the workload's name,
// the agent it runs on and the SHA-256 of its rendered runtimeConfig. Two
// replicas that render the same spec produce the same instance name, so a
// failover never makes an agent restart a workload.
//
// Its json tags are the keys of snapshot records: frozen (see Rendered).
type InstanceName struct {
	WorkloadName string `json:"WorkloadName"`
	AgentName    string `json:"AgentName"`
	ID           string `json:"ID"`
}

// NewInstanceName computes the instance name of a rendered workload.
func NewInstanceName(workload, agent, renderedRuntimeConfig string) InstanceName {
	sum := sha256.Sum256([]byte(renderedRuntimeConfig))
	return InstanceName{WorkloadName: workload, AgentName: agent, ID: hex.EncodeToString(sum[:])}
}

// String is the Ankaios form "<workload>.<id>.<agent>".
func (n InstanceName) String() string {
	return n.WorkloadName + "." + n.ID + "." + n.AgentName
}

// ParseInstanceName parses "<workload>.<id>.<agent>".
func ParseInstanceName(s string) (InstanceName, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return InstanceName{}, fmt.Errorf("instance name %q is not of the form <workload>.<id>.<agent>", s)
	}
	return InstanceName{WorkloadName: parts[0], ID: parts[1], AgentName: parts[2]}, nil
}

// WorkloadState pairs an instance with its execution state.
// Its json tags are the keys of snapshot record 7: frozen (see Rendered).
type WorkloadState struct {
	Instance InstanceName   `json:"Instance"`
	State    ExecutionState `json:"State"`
}

// Get returns the state of an instance.
func (m WorkloadStatesMap) Get(n InstanceName) (ExecutionState, bool) {
	s, ok := m[n.AgentName][n.WorkloadName][n.ID]
	return s, ok
}

// Set stores the state of an instance, creating the parent maps.
func (m WorkloadStatesMap) Set(n InstanceName, s ExecutionState) {
	wls := m[n.AgentName]
	if wls == nil {
		wls = map[string]map[string]ExecutionState{}
		m[n.AgentName] = wls
	}
	ids := wls[n.WorkloadName]
	if ids == nil {
		ids = map[string]ExecutionState{}
		wls[n.WorkloadName] = ids
	}
	ids[n.ID] = s
}

// Delete removes the state of an instance and prunes empty parents.
func (m WorkloadStatesMap) Delete(n InstanceName) {
	wls := m[n.AgentName]
	if wls == nil {
		return
	}
	ids := wls[n.WorkloadName]
	delete(ids, n.ID)
	if len(ids) == 0 {
		delete(wls, n.WorkloadName)
	}
	if len(wls) == 0 {
		delete(m, n.AgentName)
	}
}

// OfAgent lists the states of all instances on one agent.
func (m WorkloadStatesMap) OfAgent(agent string) []WorkloadState {
	var out []WorkloadState
	for wl, ids := range m[agent] {
		for id, s := range ids {
			out = append(out, WorkloadState{Instance: InstanceName{WorkloadName: wl, AgentName: agent, ID: id}, State: s})
		}
	}
	sortStates(out)
	return out
}

// All lists every state, sorted by agent, workload and id.
func (m WorkloadStatesMap) All() []WorkloadState {
	var out []WorkloadState
	for agent, wls := range m {
		for wl, ids := range wls {
			for id, s := range ids {
				out = append(out, WorkloadState{Instance: InstanceName{WorkloadName: wl, AgentName: agent, ID: id}, State: s})
			}
		}
	}
	sortStates(out)
	return out
}

// Len counts the instances.
func (m WorkloadStatesMap) Len() int {
	n := 0
	for _, wls := range m {
		for _, ids := range wls {
			n += len(ids)
		}
	}
	return n
}
