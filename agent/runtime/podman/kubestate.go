package podman

import (
	"fmt"
	"sort"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// kubeRank orders the states of a podman-kube workload's containers as
// Ankaios combines them: the workload takes the first in this order that
// any of its containers is in. A pod that is gone ranks where Ankaios
// puts an unknown one (see kubeState).
type kubeRank int

const (
	rankFailed kubeRank = iota
	rankStarting
	rankGone // Ankaios: Unknown for a missing pod
	rankUnknown
	rankRunning
	rankStopping
	rankSucceeded
)

// containerRank maps one container as the Ankaios podman CLI maps its
// state for podman-kube: created, configured and initialized are
// starting; exited is succeeded with exit code 0, failed otherwise;
// paused and anything unknown is unknown; stopping, stopped and removing
// are stopping.
func containerRank(c container) (kubeRank, string) {
	s := strings.ToLower(c.State)
	switch s {
	case "running":
		return rankRunning, ""
	case "created", "configured", "initialized":
		return rankStarting, ""
	case "exited":
		if c.ExitCode == 0 {
			return rankSucceeded, ""
		}
		return rankFailed, fmt.Sprintf("exit code %d", c.ExitCode)
	case "stopping", "stopped", "removing":
		return rankStopping, ""
	}
	return rankUnknown, ""
}

// kubeState is the execution state of a podman-kube workload from the
// containers (infra containers included, as Ankaios counts them) of its
// pods, given by pod id. Ankaios takes the lowest state of all
// containers in the order failed, starting, unknown, running, stopping,
// succeeded; without any container it is lost. Grapnel differs in one
// point: a pod that is gone is Failed(Lost) (ranked where Ankaios ranks
// its Unknown), so that drift repair and the power-cycle rules replace
// it instead of waiting for it forever. A workload whose manifest made
// no pod has ended: Succeeded(Ok), as Ankaios says when it has no pods.
func kubeState(pods []string, byPod map[string][]container) state.ExecutionState {
	if len(pods) == 0 {
		return state.SucceededOk
	}
	best, info := rankSucceeded+1, ""
	for _, p := range pods {
		cs := byPod[p]
		if len(cs) == 0 {
			if rankGone < best {
				best, info = rankGone, "pod "+shortID(p)+" is gone"
			}
			continue
		}
		// Sorted, so that the same containers give the same info.
		sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
		for _, c := range cs {
			if r, why := containerRank(c); r < best {
				best, info = r, why
			}
		}
	}
	switch best {
	case rankFailed:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: info}
	case rankStarting:
		return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: "starting container"}
	case rankGone:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost, AdditionalInfo: info}
	case rankUnknown:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: "unknown container state"}
	case rankRunning:
		return state.RunningOk
	case rankStopping:
		return state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping, AdditionalInfo: "stopping container"}
	}
	return state.SucceededOk
}

// shortID is a pod or container id as podman shows it: 12 characters.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// podsOf groups the containers of a `podman ps --all` answer by the pods
// in want.
func podsOf(s *snapshot, want []string) map[string][]container {
	in := make(map[string]bool, len(want))
	for _, p := range want {
		in[p] = true
	}
	out := make(map[string][]container, len(want))
	for _, c := range s.byID {
		if c.Pod != "" && in[c.Pod] {
			out[c.Pod] = append(out[c.Pod], c)
		}
	}
	return out
}
