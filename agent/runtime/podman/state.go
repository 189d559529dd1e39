package podman

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// container is the part of one `podman ps --format json` entry this
// package reads.
type container struct {
	ID       string            `json:"Id"`
	Names    []string          `json:"Names"`
	State    string            `json:"State"`
	ExitCode int               `json:"ExitCode"`
	Labels   map[string]string `json:"Labels"`
	// Pod is the id of the pod the container belongs to ("" for none);
	// the podman-kube runtime finds its containers by it.
	Pod     string `json:"Pod"`
	IsInfra bool   `json:"IsInfra"`
}

// parsePS decodes the output of `podman ps --format json`.
func parsePS(out string) ([]container, error) {
	var cs []container
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		return nil, fmt.Errorf("podman ps: cannot parse its output: %w", err)
	}
	return cs, nil
}

// execState maps a podman container state to an execution state as the
// Ankaios podman runtime does. Podman's states are: configured, created,
// initialized, running, paused, stopping, stopped, exited, removing,
// unknown; the ones Ankaios does not map become Failed(Unknown) with
// podman's word for it.
func execState(c container) state.ExecutionState {
	s := strings.ToLower(c.State)
	switch s {
	case "running":
		return state.RunningOk
	case "created", "configured", "initialized":
		return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: s}
	case "exited":
		if c.ExitCode == 0 {
			return state.SucceededOk
		}
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed,
			AdditionalInfo: fmt.Sprintf("exit code %d", c.ExitCode)}
	case "stopping", "stopped", "removing":
		return state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping, AdditionalInfo: s}
	}
	if s == "" {
		s = "no state reported by podman"
	}
	return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: s}
}
