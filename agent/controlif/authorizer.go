package controlif

import (
	"strings"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// wildcard matches one whole mask segment, or any run of characters in a
// log rule's workload name.
const wildcard = "*"

// authorizer decides which requests a workload may send, from its
// controlInterfaceAccess. It is immutable once built.
type authorizer struct {
	allowRead, allowWrite []stateRule
	denyRead, denyWrite   []stateRule
	allowLogs, denyLogs   []logRule
}

// stateRule is one StateRule: it matches a mask path when any of its
// filter masks does.
type stateRule [][]string

// logRule is one LogRule: it matches a workload name when any of its
// patterns does.
type logRule []string

// newAuthorizer sorts the rules by kind and operation; a ReadWrite rule
// counts for both operations and a Nothing rule for none.
//
// swdd~agent-authorizing-supported-rules~1
// swdd~agent-authorizing-request-operations~2
func newAuthorizer(a state.ControlInterfaceAccess) *authorizer {
	z := &authorizer{}
	z.allowRead, z.allowWrite, z.allowLogs = splitRules(a.AllowRules)
	z.denyRead, z.denyWrite, z.denyLogs = splitRules(a.DenyRules)
	return z
}

func splitRules(rules []state.AccessRule) (read, write []stateRule, logs []logRule) {
	for _, r := range rules {
		if r.IsLogRule {
			logs = append(logs, logRule(r.WorkloadNames))
			continue
		}
		sr := make(stateRule, 0, len(r.FilterMasks))
		for _, m := range r.FilterMasks {
			sr = append(sr, segments(m))
		}
		switch r.Operation {
		case state.RWRead:
			read = append(read, sr)
		case state.RWWrite:
			write = append(write, sr)
		case state.RWReadWrite:
			read = append(read, sr)
			write = append(write, sr)
		}
	}
	return read, write, logs
}

// segments splits a mask at its dots; the empty mask has no segments.
func segments(mask string) []string {
	if mask == "" {
		return nil
	}
	return strings.Split(mask, ".")
}

// authorize reports whether the workload may send req. Requests without
// content are refused; cancelling logs or events is always allowed, since
// it can only end something that was allowed before.
//
// swdd~agent-authorizing-request-operations~2
// swdd~agent-authorizing-logs-cancel-always-allowed~1
func (z *authorizer) authorize(req *ankbase.Request) bool {
	switch c := req.GetRequestContent().(type) {
	case *ankbase.Request_CompleteStateRequest:
		return stateAllowed(c.CompleteStateRequest.GetFieldMask(), z.allowRead, z.denyRead)
	case *ankbase.Request_UpdateStateRequest:
		return stateAllowed(c.UpdateStateRequest.GetUpdateMask(), z.allowWrite, z.denyWrite)
	case *ankbase.Request_LogsRequest:
		return z.logsAllowed(c.LogsRequest)
	case *ankbase.Request_LogsCancelRequest, *ankbase.Request_EventsCancelRequest:
		return true
	default:
		return false
	}
}

// stateAllowed allows a state request when every mask is allowed; an empty
// mask list stands for the root path, which only rules that start with
// '*' reach.
//
// swdd~agent-authorizing-request-without-filter-mask~2
// swdd~agent-authorizing-all-elements-of-filter-mask-allowed~1
// swdd~agent-authorizing-condition-element-filter-mask-allowed~1
func stateAllowed(masks []string, allow, deny []stateRule) bool {
	if len(masks) == 0 {
		masks = []string{""}
	}
	for _, m := range masks {
		path := segments(m)
		if !anyRule(allow, path, allowMatch) || anyRule(deny, path, denyMatch) {
			return false
		}
	}
	return true
}

func anyRule(rules []stateRule, path []string, match func(rule, path []string) bool) bool {
	for _, r := range rules {
		for _, p := range r {
			if match(p, path) {
				return true
			}
		}
	}
	return false
}

// allowMatch: the rule is the path or a prefix of it. A rule longer than
// the path matches only when it starts with '*', and then on the segments
// the two share, as in Ankaios.
//
// swdd~agent-authorizing-matching-allow-rules~1
func allowMatch(rule, path []string) bool {
	if len(rule) > len(path) && rule[0] != wildcard {
		return false
	}
	return overlapMatches(rule, path)
}

// denyMatch: the rule and the path agree on the segments they share, so a
// denied path also denies every ancestor of it (reading the whole state
// would reveal it).
//
// swdd~agent-authorizing-matching-deny-rules~1
func denyMatch(rule, path []string) bool {
	return overlapMatches(rule, path)
}

// overlapMatches compares the segments rule and path share; a rule
// without segments never matches.
//
// swdd~agent-authorizing-rules-without-segments-never-match~1
// swdd~agent-authorizing-matching-rules-elements~1
func overlapMatches(rule, path []string) bool {
	if len(rule) == 0 {
		return false
	}
	for i := 0; i < len(rule) && i < len(path); i++ {
		if rule[i] != wildcard && rule[i] != path[i] {
			return false
		}
	}
	return true
}

// logsAllowed allows a LogsRequest when every requested workload matches
// an allow LogRule and no deny LogRule; asking for no workload at all is
// allowed, as it does nothing.
//
// swdd~agent-authorizing-logs-if-all-requested-workloads-allowed~1
func (z *authorizer) logsAllowed(req *ankbase.LogsRequest) bool {
	for _, n := range req.GetWorkloadNames() {
		name := n.GetWorkloadName()
		if !anyLogRule(z.allowLogs, name) || anyLogRule(z.denyLogs, name) {
			return false
		}
	}
	return true
}

func anyLogRule(rules []logRule, name string) bool {
	for _, r := range rules {
		if r.matches(name) {
			return true
		}
	}
	return false
}

// matches: a pattern equal to the name, a lone '*', or a pattern whose
// text before and after its '*' are a prefix and a suffix of the name that
// do not overlap.
//
// swdd~agent-authorizing-log-rules-matches-request~1
func (r logRule) matches(name string) bool {
	for _, p := range r {
		if p == name || p == wildcard {
			return true
		}
		prefix, suffix, ok := strings.Cut(p, wildcard)
		if ok && len(prefix)+len(suffix) <= len(name) &&
			strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}
