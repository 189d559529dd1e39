package check

import (
	"fmt"
	"strings"
)

// IntruderFinding is what one intrusion left: the attempts the replicas
// accepted, and what the cluster showed of it afterwards.
type IntruderFinding struct {
	Attempts int
	// Accepted lists the attempts a replica took ("target channel: what").
	Accepted []string
	// Traces lists what an accepted attempt left in the cluster: the
	// intruder in the Raft configuration, its agent or workload in the
	// state, a replayed update undoing a later one.
	Traces []string
}

// IntruderRefused passes when every intrusion of the campaign was
// refused on every channel and left nothing behind.
func IntruderRefused(fs []IntruderFinding) Result {
	res := Result{Name: "intruder-refused"}
	attempts := 0
	var bad []string
	for i, f := range fs {
		attempts += f.Attempts
		for _, a := range f.Accepted {
			bad = append(bad, fmt.Sprintf("intrusion %d accepted %s", i+1, a))
		}
		for _, t := range f.Traces {
			bad = append(bad, fmt.Sprintf("intrusion %d left %s", i+1, t))
		}
	}
	switch {
	case len(fs) == 0:
		res.OK, res.Detail = true, "no intrusion in this campaign (insecure, or not scheduled)"
	case len(bad) > 0:
		res.Detail = strings.Join(bad, "; ")
	case attempts == 0:
		res.Detail = "the intruder made no attempt"
	default:
		res.OK = true
		res.Detail = fmt.Sprintf("%d intrusions, %d attempts, every one refused; the intruder never entered the Raft configuration and left nothing in the state", len(fs), attempts)
	}
	return res
}
