package controlif

import (
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func stateRuleOf(op state.ReadWrite, masks ...string) state.AccessRule {
	return state.AccessRule{Operation: op, FilterMasks: masks}
}

func logRuleOf(names ...string) state.AccessRule {
	return state.AccessRule{IsLogRule: true, WorkloadNames: names}
}

func readReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "r", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}}
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

func TestAuthorizer(t *testing.T) {
	const (
		wlTags   = "desiredState.workloads.nginx.tags"
		wlNginx  = "desiredState.workloads.nginx"
		wlOther  = "desiredState.workloads.other"
		wls      = "desiredState.workloads"
		desired  = "desiredState"
		anyWlTag = "desiredState.workloads.*.tags"
	)
	logsCancel := &ankbase.Request{RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}}
	eventsCancel := &ankbase.Request{RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}}
	tests := []struct {
		name  string
		allow []state.AccessRule
		deny  []state.AccessRule
		req   *ankbase.Request
		want  bool
	}{
		// swdd~agent-authorizing-matching-allow-rules~1
		{"same path allowed", []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, nil, readReq(wlNginx), true},
		{"rule is prefix of mask", []state.AccessRule{stateRuleOf(state.RWRead, wls)}, nil, readReq(wlTags), true},
		{"mask is prefix of rule: denied", []state.AccessRule{stateRuleOf(state.RWRead, wlTags)}, nil, readReq(wlNginx), false},
		{"sibling denied", []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, nil, readReq(wlOther), false},
		{"no rules deny everything", nil, nil, readReq(wlNginx), false},
		// swdd~agent-authorizing-matching-rules-elements~1
		{"wildcard segment", []state.AccessRule{stateRuleOf(state.RWRead, anyWlTag)}, nil, readReq(wlTags), true},
		{"wildcard segment, other field", []state.AccessRule{stateRuleOf(state.RWRead, anyWlTag)}, nil, readReq("desiredState.workloads.nginx.agent"), false},
		{"wildcard rule longer than mask matches shared segments", []state.AccessRule{stateRuleOf(state.RWRead, "*.workloads")}, nil, readReq(desired), true},
		{"no partial-segment wildcard", []state.AccessRule{stateRuleOf(state.RWRead, "desiredState.workloads.ng*")}, nil, readReq(wlNginx), false},
		// swdd~agent-authorizing-request-without-filter-mask~2
		{"empty mask needs a rule starting with *", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, nil, readReq(), false},
		{"empty mask allowed by *", []state.AccessRule{stateRuleOf(state.RWRead, "*")}, nil, readReq(), true},
		{"empty mask allowed by *.x", []state.AccessRule{stateRuleOf(state.RWRead, "*.workloads")}, nil, readReq(), true},
		{"empty mask denied by any deny rule", []state.AccessRule{stateRuleOf(state.RWRead, "*")}, []state.AccessRule{stateRuleOf(state.RWRead, wlTags)}, readReq(), false},
		{"empty write mask allowed by *", []state.AccessRule{stateRuleOf(state.RWWrite, "*")}, nil, writeReq(), true},
		// swdd~agent-authorizing-rules-without-segments-never-match~1
		{"empty allow rule never matches", []state.AccessRule{stateRuleOf(state.RWRead, "")}, nil, readReq(), false},
		{"empty allow rule never matches a mask", []state.AccessRule{stateRuleOf(state.RWRead, "")}, nil, readReq(desired), false},
		{"empty deny rule never matches", []state.AccessRule{stateRuleOf(state.RWRead, "*")}, []state.AccessRule{stateRuleOf(state.RWRead, "")}, readReq(), true},
		// swdd~agent-authorizing-matching-deny-rules~1
		{"deny same path", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, readReq(wlNginx), false},
		{"deny ancestor of denied path", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWRead, wlTags)}, readReq(wls), false},
		{"deny descendant of denied path", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, readReq(wlTags), false},
		{"deny does not touch siblings", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, readReq(wlOther), true},
		{"deny with wildcard", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWRead, anyWlTag)}, readReq("desiredState.workloads.other.tags.x"), false},
		{"deny of another operation does not apply", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, []state.AccessRule{stateRuleOf(state.RWWrite, wlNginx)}, readReq(wlNginx), true},
		// swdd~agent-authorizing-all-elements-of-filter-mask-allowed~1
		// swdd~agent-authorizing-condition-element-filter-mask-allowed~1
		{"all masks allowed", []state.AccessRule{stateRuleOf(state.RWRead, wlNginx, wlOther)}, nil, readReq(wlNginx, wlOther), true},
		{"one mask not allowed", []state.AccessRule{stateRuleOf(state.RWRead, wlNginx)}, nil, readReq(wlNginx, wlOther), false},
		{"masks allowed by different rules", []state.AccessRule{stateRuleOf(state.RWRead, wlNginx), stateRuleOf(state.RWRead, wlOther)}, nil, readReq(wlNginx, wlOther), true},
		{"one mask denied", []state.AccessRule{stateRuleOf(state.RWRead, wls)}, []state.AccessRule{stateRuleOf(state.RWRead, wlOther)}, readReq(wlNginx, wlOther), false},
		// swdd~agent-authorizing-request-operations~2
		{"read rule does not allow writes", []state.AccessRule{stateRuleOf(state.RWRead, desired)}, nil, writeReq(wlNginx), false},
		{"write rule does not allow reads", []state.AccessRule{stateRuleOf(state.RWWrite, desired)}, nil, readReq(wlNginx), false},
		{"write rule allows writes", []state.AccessRule{stateRuleOf(state.RWWrite, desired)}, nil, writeReq(wlNginx), true},
		{"read-write rule allows reads", []state.AccessRule{stateRuleOf(state.RWReadWrite, desired)}, nil, readReq(wlNginx), true},
		{"read-write rule allows writes", []state.AccessRule{stateRuleOf(state.RWReadWrite, desired)}, nil, writeReq(wlNginx), true},
		{"read-write deny blocks writes", []state.AccessRule{stateRuleOf(state.RWWrite, desired)}, []state.AccessRule{stateRuleOf(state.RWReadWrite, wlNginx)}, writeReq(wlNginx), false},
		{"nothing rule allows nothing", []state.AccessRule{stateRuleOf(state.RWNothing, desired)}, nil, readReq(wlNginx), false},
		{"state rule does not allow logs", []state.AccessRule{stateRuleOf(state.RWReadWrite, "*")}, nil, logsReq("nginx"), false},
		{"log rule does not allow state", []state.AccessRule{logRuleOf("*")}, nil, readReq(desired), false},
		{"request without content denied", []state.AccessRule{stateRuleOf(state.RWReadWrite, "*")}, nil, &ankbase.Request{RequestId: "x"}, false},
		// swdd~agent-authorizing-logs-if-all-requested-workloads-allowed~1
		{"logs of allowed workload", []state.AccessRule{logRuleOf("nginx")}, nil, logsReq("nginx"), true},
		{"logs of other workload", []state.AccessRule{logRuleOf("nginx")}, nil, logsReq("other"), false},
		{"logs: one of two not allowed", []state.AccessRule{logRuleOf("nginx")}, nil, logsReq("nginx", "other"), false},
		{"logs: two allowed by two rules", []state.AccessRule{logRuleOf("nginx"), logRuleOf("other")}, nil, logsReq("nginx", "other"), true},
		{"logs: denied", []state.AccessRule{logRuleOf("*")}, []state.AccessRule{logRuleOf("nginx")}, logsReq("nginx"), false},
		{"logs: deny of another workload", []state.AccessRule{logRuleOf("*")}, []state.AccessRule{logRuleOf("nginx")}, logsReq("other"), true},
		{"logs: no workloads requested", nil, nil, logsReq(), true},
		// swdd~agent-authorizing-log-rules-matches-request~1
		{"log rule *", []state.AccessRule{logRuleOf("*")}, nil, logsReq("anything"), true},
		{"log rule prefix*", []state.AccessRule{logRuleOf("ivi_*")}, nil, logsReq("ivi_radio"), true},
		{"log rule prefix* matches the bare prefix", []state.AccessRule{logRuleOf("ivi_*")}, nil, logsReq("ivi_"), true},
		{"log rule prefix* mismatch", []state.AccessRule{logRuleOf("ivi_*")}, nil, logsReq("nav_radio"), false},
		{"log rule *suffix", []state.AccessRule{logRuleOf("*_logger")}, nil, logsReq("sys_logger"), true},
		{"log rule infix", []state.AccessRule{logRuleOf("a*z")}, nil, logsReq("abcz"), true},
		{"log rule infix needs both ends", []state.AccessRule{logRuleOf("a*z")}, nil, logsReq("abcy"), false},
		{"log rule prefix and suffix may not overlap", []state.AccessRule{logRuleOf("ab*ba")}, nil, logsReq("aba"), false},
		{"log rule later pattern matches", []state.AccessRule{logRuleOf("ivi_*", "nginx")}, nil, logsReq("nginx"), true},
		{"log deny with wildcard", []state.AccessRule{logRuleOf("*")}, []state.AccessRule{logRuleOf("ivi_*")}, logsReq("ivi_updater"), false},
		// swdd~agent-authorizing-logs-cancel-always-allowed~1
		{"logs cancel always allowed", nil, nil, logsCancel, true},
		{"events cancel always allowed", nil, nil, eventsCancel, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := newAuthorizer(state.ControlInterfaceAccess{AllowRules: tt.allow, DenyRules: tt.deny})
			if got := z.authorize(tt.req); got != tt.want {
				t.Fatalf("authorize = %v, want %v", got, tt.want)
			}
		})
	}
}
