package logcampaign

import "strings"

// collector is the requester of a campaign, parsed from its request id:
// either a client connection or a workload on an agent.
type collector struct {
	isWorkload bool
	// connection names a client connection ("cli-conn-<uuid>" for the id
	// "cli-conn-<uuid>@<id>"); set when isWorkload is false.
	connection string
	// workload names the collector workload for the id
	// "<agent>@<workload>@<id>"; set when isWorkload is true.
	workload workloadKey
}

// workloadKey identifies a workload on an agent.
type workloadKey struct {
	agent, workload string
}

// parseCollector derives the collector from a request id prefixed by the
// gRPC layer. An id with one '@' was sent by a client connection; an id with
// two or more was sent by a workload through its agent's control interface
// (the workload's own id may contain '@' itself). An id without '@' never
// comes from the gRPC layer; it is kept as its own connection so that Remove
// can still forget it.
func parseCollector(requestID string) collector {
	parts := strings.SplitN(requestID, "@", 3)
	switch len(parts) {
	case 3:
		return collector{isWorkload: true, workload: workloadKey{agent: parts[0], workload: parts[1]}}
	case 2:
		return collector{connection: parts[0]}
	default:
		return collector{connection: requestID}
	}
}
