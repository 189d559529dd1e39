package access

import (
	"errors"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func stateRuleOf(op state.ReadWrite, masks ...string) state.AccessRule {
	return state.AccessRule{Operation: op, FilterMasks: masks}
}

func logRuleOf(names ...string) state.AccessRule {
	return state.AccessRule{IsLogRule: true, WorkloadNames: names}
}

func rules(rs ...state.AccessRule) []state.AccessRule { return rs }

func readReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "r", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}}
}

func subscribeReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "s", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks, SubscribeForEvents: true}}}
}

func writeReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "w", RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{UpdateMask: masks}}}
}

func logsReq(names ...string) *ankbase.Request {
	var wl []*ankbase.WorkloadInstanceName
	for _, n := range names {
		wl = append(wl, &ankbase.WorkloadInstanceName{WorkloadName: n, AgentName: "agent_A", Id: "1234"})
	}
	return &ankbase.Request{RequestId: "l", RequestContent: &ankbase.Request_LogsRequest{
		LogsRequest: &ankbase.LogsRequest{WorkloadNames: wl}}}
}

func TestAuthorize(t *testing.T) {
	const (
		wlTags   = "desiredState.workloads.nginx.tags"
		wlNginx  = "desiredState.workloads.nginx"
		wlOther  = "desiredState.workloads.other"
		wls      = "desiredState.workloads"
		desired  = "desiredState"
		anyWlTag = "desiredState.workloads.*.tags"
		configs  = "desiredState.configs"
		secret   = "desiredState.configs.secret"
	)
	logsCancel := &ankbase.Request{RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}}
	eventsCancel := &ankbase.Request{RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}}
	R, W, RW, N := state.RWRead, state.RWWrite, state.RWReadWrite, state.RWNothing
	tests := []struct {
		name        string
		allow, deny []state.AccessRule
		req         *ankbase.Request
		want        bool
	}{
		// Allow rules.
		// swdd~agent-authorizing-matching-allow-rules~1
		{"same path allowed", rules(stateRuleOf(R, wlNginx)), nil, readReq(wlNginx), true},
		{"rule is prefix of mask", rules(stateRuleOf(R, wls)), nil, readReq(wlTags), true},
		{"mask is prefix of rule: denied", rules(stateRuleOf(R, wlTags)), nil, readReq(wlNginx), false},
		{"sibling denied", rules(stateRuleOf(R, wlNginx)), nil, readReq(wlOther), false},
		{"no rules deny everything", nil, nil, readReq(wlNginx), false},
		{"a segment is not a text prefix", rules(stateRuleOf(R, "desiredState.workloads.ngi")), nil, readReq(wlNginx), false},
		// swdd~agent-authorizing-matching-rules-elements~1
		{"wildcard segment", rules(stateRuleOf(R, anyWlTag)), nil, readReq(wlTags), true},
		{"wildcard segment, other field", rules(stateRuleOf(R, anyWlTag)), nil, readReq("desiredState.workloads.nginx.agent"), false},
		{"no partial-segment wildcard", rules(stateRuleOf(R, "desiredState.workloads.ng*")), nil, readReq(wlNginx), false},
		// Ankaios lets '*.workloads' reach 'desiredState' (and the whole
		// state), which holds the configs too; here only trailing '*'
		// segments may be longer than the mask.
		{"wildcard rule longer than mask: only by trailing *", rules(stateRuleOf(R, "*.workloads")), nil, readReq(desired), false},
		{"*.* covers a top-level field", rules(stateRuleOf(R, "*.*")), nil, readReq(desired), true},
		{"longer rule must start with *", rules(stateRuleOf(R, "desiredState.workloads.*")), nil, readReq(wls), false},
		// swdd~agent-authorizing-request-without-filter-mask~2
		{"empty mask needs the rule *", rules(stateRuleOf(R, desired)), nil, readReq(), false},
		{"empty mask allowed by *", rules(stateRuleOf(R, "*")), nil, readReq(), true},
		{"empty mask not allowed by *.x", rules(stateRuleOf(R, "*.workloads")), nil, readReq(), false},
		{"empty mask denied by any deny rule", rules(stateRuleOf(R, "*")), rules(stateRuleOf(R, wlTags)), readReq(), false},
		{"empty write mask allowed by *", rules(stateRuleOf(W, "*")), nil, writeReq(), true},
		// swdd~agent-authorizing-rules-without-segments-never-match~1
		{"empty allow rule never matches", rules(stateRuleOf(R, "")), nil, readReq(), false},
		{"empty allow rule never matches a mask", rules(stateRuleOf(R, "")), nil, readReq(desired), false},
		{"empty deny rule never matches", rules(stateRuleOf(R, "*")), rules(stateRuleOf(R, "")), readReq(), true},

		// Deny rules; deny wins.
		// swdd~agent-authorizing-matching-deny-rules~1
		// swdd~agent-authorizing-condition-element-filter-mask-allowed~1
		{"deny same path", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, wlNginx)), readReq(wlNginx), false},
		{"deny ancestor of denied path", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, wlTags)), readReq(wls), false},
		{"deny descendant of denied path", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, wlNginx)), readReq(wlTags), false},
		{"deny does not touch siblings", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, wlNginx)), readReq(wlOther), true},
		{"deny with wildcard", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, anyWlTag)), readReq("desiredState.workloads.other.tags.x"), false},
		{"deny wins over the same allow rule", rules(stateRuleOf(R, wlNginx)), rules(stateRuleOf(R, wlNginx)), readReq(wlNginx), false},
		{"deny wins over a wildcard allow", rules(stateRuleOf(RW, "*")), rules(stateRuleOf(R, secret)), readReq(secret), false},

		// Wildcards in the request: every name the '*' can stand for.
		// Issue 17's attack: Ankaios compared the request's '*' with
		// 'secret' literally and returned the secret.
		{"issue 17: read configs.* past a denied config", rules(stateRuleOf(R, configs)), rules(stateRuleOf(R, secret)), readReq("desiredState.configs.*"), false},
		{"issue 17: subscribe to configs.* past a denied config", rules(stateRuleOf(R, configs)), rules(stateRuleOf(R, secret)), subscribeReq("desiredState.configs.*"), false},
		{"issue 17: read configs.*.x past a denied config", rules(stateRuleOf(R, configs)), rules(stateRuleOf(R, secret)), readReq("desiredState.configs.*.x"), false},
		{"issue 17: read *.configs past a denied config", rules(stateRuleOf(R, "*")), rules(stateRuleOf(R, secret)), readReq("*.configs"), false},
		{"issue 17: read everything as *", rules(stateRuleOf(R, "*")), rules(stateRuleOf(R, secret)), readReq("*"), false},
		{"request * in the middle reaches a denied field", rules(stateRuleOf(R, wls)), rules(stateRuleOf(R, "desiredState.workloads.db.runtimeConfig")), readReq("desiredState.workloads.*.runtimeConfig"), false},
		{"request * in the middle misses a denied field", rules(stateRuleOf(R, wls)), rules(stateRuleOf(R, "desiredState.workloads.db.runtimeConfig")), readReq(anyWlTag), true},
		{"request * with a denied sibling of the parent", rules(stateRuleOf(R, desired)), rules(stateRuleOf(R, secret)), readReq("desiredState.workloads.*"), true},
		{"request * is not covered by a literal allow rule", rules(stateRuleOf(R, "desiredState.configs.a")), nil, readReq("desiredState.configs.*"), false},
		{"request * is covered by an allow rule *", rules(stateRuleOf(R, "desiredState.configs.*")), nil, readReq("desiredState.configs.*"), true},
		{"request * under an allowed prefix", rules(stateRuleOf(R, configs)), nil, readReq("desiredState.configs.*"), true},
		{"write * past a denied workload", rules(stateRuleOf(W, wls)), rules(stateRuleOf(W, "desiredState.workloads.critical")), writeReq("desiredState.workloads.*"), false},
		{"write *.tags past a denied workload", rules(stateRuleOf(W, wls)), rules(stateRuleOf(W, "desiredState.workloads.critical")), writeReq(anyWlTag), false},
		{"write * not covered by a literal allow", rules(stateRuleOf(W, wlNginx)), nil, writeReq("desiredState.workloads.*"), false},
		// A read of state returns subState too (state.FilterTree).
		{"reading state reveals a denied subState", rules(stateRuleOf(R, "workloadStates")), rules(stateRuleOf(R, "workloadStates.a.w.1.subState")), readReq("workloadStates.a.w.1.state"), false},
		{"reading *.a.w.1.subState reveals a denied state", rules(stateRuleOf(R, "*")), rules(stateRuleOf(R, "workloadStates.a.w.1.state")), readReq("*.a.w.1.subState"), false},
		{"reading state allowed by a state rule", rules(stateRuleOf(R, "workloadStates.*.*.*.state")), nil, readReq("workloadStates.a.w.1.state"), true},

		// swdd~agent-authorizing-all-elements-of-filter-mask-allowed~1
		{"all masks allowed", rules(stateRuleOf(R, wlNginx, wlOther)), nil, readReq(wlNginx, wlOther), true},
		{"one mask not allowed", rules(stateRuleOf(R, wlNginx)), nil, readReq(wlNginx, wlOther), false},
		{"masks allowed by different rules", rules(stateRuleOf(R, wlNginx), stateRuleOf(R, wlOther)), nil, readReq(wlNginx, wlOther), true},
		{"one mask denied", rules(stateRuleOf(R, wls)), rules(stateRuleOf(R, wlOther)), readReq(wlNginx, wlOther), false},

		// Read and write are separate.
		// swdd~agent-authorizing-request-operations~2
		{"read rule does not allow writes", rules(stateRuleOf(R, desired)), nil, writeReq(wlNginx), false},
		{"write rule does not allow reads", rules(stateRuleOf(W, desired)), nil, readReq(wlNginx), false},
		{"write rule does not allow subscriptions", rules(stateRuleOf(W, desired)), nil, subscribeReq(wlNginx), false},
		{"write rule allows writes", rules(stateRuleOf(W, desired)), nil, writeReq(wlNginx), true},
		{"read-write rule allows reads", rules(stateRuleOf(RW, desired)), nil, readReq(wlNginx), true},
		{"read-write rule allows writes", rules(stateRuleOf(RW, desired)), nil, writeReq(wlNginx), true},
		{"read-write deny blocks writes", rules(stateRuleOf(W, desired)), rules(stateRuleOf(RW, wlNginx)), writeReq(wlNginx), false},
		{"read-write deny blocks reads", rules(stateRuleOf(R, desired)), rules(stateRuleOf(RW, wlNginx)), readReq(wlNginx), false},
		{"deny of another operation does not apply", rules(stateRuleOf(R, desired)), rules(stateRuleOf(W, wlNginx)), readReq(wlNginx), true},
		{"write deny does not block reads", rules(stateRuleOf(RW, desired)), rules(stateRuleOf(W, wlNginx)), readReq(wlNginx), true},
		{"read deny does not block writes", rules(stateRuleOf(RW, desired)), rules(stateRuleOf(R, wlNginx)), writeReq(wlNginx), true},
		{"nothing rule allows nothing", rules(stateRuleOf(N, desired)), nil, readReq(wlNginx), false},
		{"nothing deny denies nothing", rules(stateRuleOf(R, desired)), rules(stateRuleOf(N, wlNginx)), readReq(wlNginx), true},
		// swdd~agent-authorizing-supported-rules~1
		{"state rule does not allow logs", rules(stateRuleOf(RW, "*")), nil, logsReq("nginx"), false},
		{"log rule does not allow state", rules(logRuleOf("*")), nil, readReq(desired), false},
		{"request without content denied", rules(stateRuleOf(RW, "*")), nil, &ankbase.Request{RequestId: "x"}, false},

		// Log rules.
		// swdd~agent-authorizing-logs-if-all-requested-workloads-allowed~1
		{"logs of allowed workload", rules(logRuleOf("nginx")), nil, logsReq("nginx"), true},
		{"logs of other workload", rules(logRuleOf("nginx")), nil, logsReq("other"), false},
		{"logs: one of two not allowed", rules(logRuleOf("nginx")), nil, logsReq("nginx", "other"), false},
		{"logs: two allowed by two rules", rules(logRuleOf("nginx"), logRuleOf("other")), nil, logsReq("nginx", "other"), true},
		{"logs: denied", rules(logRuleOf("*")), rules(logRuleOf("nginx")), logsReq("nginx"), false},
		{"logs: deny of another workload", rules(logRuleOf("*")), rules(logRuleOf("nginx")), logsReq("other"), true},
		{"logs: no workloads requested", nil, nil, logsReq(), true},
		// swdd~agent-authorizing-log-rules-matches-request~1
		{"log rule *", rules(logRuleOf("*")), nil, logsReq("anything"), true},
		{"log rule prefix*", rules(logRuleOf("ivi_*")), nil, logsReq("ivi_radio"), true},
		{"log rule prefix* matches the bare prefix", rules(logRuleOf("ivi_*")), nil, logsReq("ivi_"), true},
		{"log rule prefix* mismatch", rules(logRuleOf("ivi_*")), nil, logsReq("nav_radio"), false},
		{"log rule *suffix", rules(logRuleOf("*_logger")), nil, logsReq("sys_logger"), true},
		{"log rule infix", rules(logRuleOf("a*z")), nil, logsReq("abcz"), true},
		{"log rule infix needs both ends", rules(logRuleOf("a*z")), nil, logsReq("abcy"), false},
		{"log rule prefix and suffix may not overlap", rules(logRuleOf("ab*ba")), nil, logsReq("aba"), false},
		{"log rule later pattern matches", rules(logRuleOf("ivi_*", "nginx")), nil, logsReq("nginx"), true},
		{"log deny with wildcard", rules(logRuleOf("*")), rules(logRuleOf("ivi_*")), logsReq("ivi_updater"), false},
		// swdd~agent-authorizing-logs-cancel-always-allowed~1
		{"logs cancel always allowed", nil, nil, logsCancel, true},
		{"events cancel always allowed", nil, nil, eventsCancel, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(state.ControlInterfaceAccess{AllowRules: tt.allow, DenyRules: tt.deny}).Authorize(tt.req)
			if got := err == nil; got != tt.want {
				t.Fatalf("Authorize = %v, want allowed %v", err, tt.want)
			}
			if err != nil && !errors.Is(err, errs.ErrPermissionDenied) {
				t.Fatalf("refusal %v is not ErrPermissionDenied", err)
			}
		})
	}
}

// A refusal names the right that was missing and the rule that decided.
func TestDeniedNamesRightAndRule(t *testing.T) {
	r := New(state.ControlInterfaceAccess{
		AllowRules: rules(stateRuleOf(state.RWRead, "desiredState.configs"), logRuleOf("nginx")),
		DenyRules:  rules(stateRuleOf(state.RWRead, "desiredState.configs.secret")),
	})
	for _, tc := range []struct {
		req  *ankbase.Request
		want []string
	}{
		{readReq("desiredState.configs.*"), []string{"Read 'desiredState.configs.*'", "deny rule 'desiredState.configs.secret'"}},
		{writeReq("desiredState.configs.a"), []string{"Write 'desiredState.configs.a'", "no allow rule"}},
		{logsReq("db"), []string{"logs of 'db'", "no allow log rule"}},
	} {
		err := r.Authorize(tc.req)
		var d *Denied
		if !errors.As(err, &d) {
			t.Fatalf("Authorize(%v) = %v, want a *Denied", tc.req, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refusal %q does not name %q", err, w)
			}
		}
	}
}
