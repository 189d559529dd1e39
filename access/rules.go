package access

import (
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// wildcard matches one whole mask segment, or any run of characters in a
// log rule's workload name.
const wildcard = "*"

// Op is the operation a state request needs: reading (CompleteStateRequest,
// event subscriptions included) or writing (UpdateStateRequest).
type Op int

// Operations.
const (
	Read Op = iota
	Write
)

func (o Op) String() string {
	if o == Write {
		return "Write"
	}
	return "Read"
}

// Rules is a workload's controlInterfaceAccess sorted for evaluation. It
// is immutable once built, so the agent's sessions and the server's loop
// may share one.
type Rules struct {
	allow, deny         [2][]mask // by Op
	allowLogs, denyLogs []logRule
}

// mask is a filter mask of a state rule, split at its dots.
type mask []string

// logRule is one LogRule's workload name patterns.
type logRule []string

// New sorts a workload's rules by kind and operation: a ReadWrite rule
// counts for both operations and a Nothing rule for none.
//
// swdd~agent-authorizing-supported-rules~1
// swdd~agent-authorizing-request-operations~2
func New(a state.ControlInterfaceAccess) *Rules {
	r := &Rules{}
	r.allow, r.allowLogs = split(a.AllowRules)
	r.deny, r.denyLogs = split(a.DenyRules)
	return r
}

func split(rules []state.AccessRule) (byOp [2][]mask, logs []logRule) {
	for _, rule := range rules {
		if rule.IsLogRule {
			logs = append(logs, logRule(rule.WorkloadNames))
			continue
		}
		for _, m := range rule.FilterMasks {
			segs := mask(state.SplitMask(m))
			switch rule.Operation {
			case state.RWRead:
				byOp[Read] = append(byOp[Read], segs)
			case state.RWWrite:
				byOp[Write] = append(byOp[Write], segs)
			case state.RWReadWrite:
				byOp[Read] = append(byOp[Read], segs)
				byOp[Write] = append(byOp[Write], segs)
			}
		}
	}
	return byOp, logs
}

// Denied is why a request is refused: the right it needed and the rule
// that decided. It is an errs.ErrPermissionDenied.
type Denied struct {
	// Right is what was asked for: "Read 'desiredState.configs.*'",
	// "logs of 'nginx'", or the kind of an unsupported request.
	Right string
	// Reason names the rule: "no allow rule covers it" or
	// "deny rule 'desiredState.configs.secret' matches".
	Reason string
}

func (d *Denied) Error() string { return fmt.Sprintf("may not %s: %s", d.Right, d.Reason) }

// Unwrap makes a refusal an errs.ErrPermissionDenied.
func (d *Denied) Unwrap() error { return errs.ErrPermissionDenied }

// Authorize returns nil when the workload may send req, else a *Denied.
// Requests without content are refused; cancelling logs or events is
// always allowed, since it can only end something allowed before (and
// the request id, prefixed by the agent and the server, names only the
// sender's own campaign or subscription).
//
// swdd~agent-authorizing-request-operations~2
// swdd~agent-authorizing-logs-cancel-always-allowed~1
func (r *Rules) Authorize(req *ankbase.Request) error {
	switch c := req.GetRequestContent().(type) {
	case *ankbase.Request_CompleteStateRequest:
		return r.CheckState(Read, c.CompleteStateRequest.GetFieldMask())
	case *ankbase.Request_UpdateStateRequest:
		return r.CheckState(Write, c.UpdateStateRequest.GetUpdateMask())
	case *ankbase.Request_LogsRequest:
		names := make([]string, 0, len(c.LogsRequest.GetWorkloadNames()))
		for _, n := range c.LogsRequest.GetWorkloadNames() {
			names = append(names, n.GetWorkloadName())
		}
		return r.CheckLogs(names)
	case *ankbase.Request_LogsCancelRequest, *ankbase.Request_EventsCancelRequest:
		return nil
	default:
		return &Denied{Right: "send a request without content", Reason: "no rule allows it"}
	}
}

// CheckState allows a state request when every mask is allowed; an empty
// mask list stands for the root path, which only the rule '*' reaches.
//
// swdd~agent-authorizing-request-without-filter-mask~2
// swdd~agent-authorizing-all-elements-of-filter-mask-allowed~1
// swdd~agent-authorizing-condition-element-filter-mask-allowed~1
func (r *Rules) CheckState(op Op, masks []string) error {
	if len(masks) == 0 {
		masks = []string{""}
	}
	for _, m := range masks {
		if err := r.checkMask(op, m); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rules) checkMask(op Op, m string) error {
	path := mask(state.SplitMask(m))
	right := fmt.Sprintf("%s '%s'", op, m)
	if !anyMask(r.allow[op], func(rule mask) bool { return allowCovers(rule, path) }) {
		return &Denied{Right: right, Reason: "no allow rule covers it"}
	}
	for _, p := range reached(op, path) {
		for _, rule := range r.deny[op] {
			if denyReaches(rule, p) {
				return &Denied{Right: right, Reason: fmt.Sprintf("deny rule '%s' matches", strings.Join(rule, "."))}
			}
		}
	}
	return nil
}

func anyMask(rules []mask, match func(mask) bool) bool {
	for _, r := range rules {
		if match(r) {
			return true
		}
	}
	return false
}

// reached lists the masks a request mask gives access to. A read of one
// of an execution state's state and subState also returns the other
// (state.FilterTree), so a deny rule on either refuses both.
func reached(op Op, path mask) []mask {
	sib, ok := state.ExecStateSibling(path)
	if op != Read || !ok {
		return []mask{path}
	}
	other := append(mask{"workloadStates"}, path[1:4]...)
	return []mask{path, append(other, sib)}
}

// allowCovers: every path the request mask can expand to lies under the
// rule. The rule is the mask or a prefix of it, segment by segment; a
// rule segment '*' covers any request segment, but a request segment '*'
// (every name) is covered only by a rule '*'. A rule longer than the mask
// covers it only when it starts with '*', as in Ankaios, and its extra
// segments are all '*' (so '*' covers the empty mask, the whole state,
// and '*.workloads' does not: it would reveal the configs).
//
// swdd~agent-authorizing-matching-allow-rules~1
// swdd~agent-authorizing-matching-rules-elements~1
// swdd~agent-authorizing-rules-without-segments-never-match~1
func allowCovers(rule, path mask) bool {
	if len(rule) == 0 {
		return false
	}
	if len(rule) > len(path) {
		if rule[0] != wildcard {
			return false
		}
		for _, s := range rule[len(path):] {
			if s != wildcard {
				return false
			}
		}
	}
	for i := 0; i < len(rule) && i < len(path); i++ {
		if rule[i] != wildcard && (path[i] == wildcard || rule[i] != path[i]) {
			return false
		}
	}
	return true
}

// denyReaches: some path the request mask can expand to lies under the
// denied mask, or above it (reading the whole state would reveal it). The
// two agree on the segments they share, where a '*' on either side
// agrees with anything: Ankaios compares a request's '*' literally, so
// reading 'desiredState.configs.*' passed a deny rule on
// 'desiredState.configs.secret' while the answer held the secret.
//
// swdd~agent-authorizing-matching-deny-rules~1
// swdd~agent-authorizing-matching-rules-elements~1
// swdd~agent-authorizing-rules-without-segments-never-match~1
func denyReaches(rule, path mask) bool {
	if len(rule) == 0 {
		return false
	}
	for i := 0; i < len(rule) && i < len(path); i++ {
		if rule[i] != wildcard && path[i] != wildcard && rule[i] != path[i] {
			return false
		}
	}
	return true
}

// CheckLogs allows a LogsRequest when every requested workload matches
// an allow LogRule and no deny LogRule; asking for no workload at all is
// allowed, as it does nothing.
//
// swdd~agent-authorizing-logs-if-all-requested-workloads-allowed~1
func (r *Rules) CheckLogs(workloads []string) error {
	for _, name := range workloads {
		right := fmt.Sprintf("read the logs of '%s'", name)
		if !anyLogRule(r.allowLogs, name) {
			return &Denied{Right: right, Reason: "no allow log rule matches"}
		}
		if anyLogRule(r.denyLogs, name) {
			return &Denied{Right: right, Reason: "a deny log rule matches"}
		}
	}
	return nil
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
