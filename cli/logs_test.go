package cli

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func TestResolveInstances(t *testing.T) {
	// swdd~cli-uses-workload-states-to-sample-workload-to-instance-names~1
	cs := tree(t, clusterYAML)
	tests := []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{[]string{"web"}, []string{"web.1111.agent_A"}, ""},
		{[]string{"db"}, []string{"db.2222.agent_A", "db.3333.agent_B"}, ""},
		{[]string{"web", "db", "web"}, []string{"web.1111.agent_A", "db.2222.agent_A", "db.3333.agent_B"}, ""},
		// batch is desired but has no state, so it has no instance to ask.
		{[]string{"batch"}, nil, "workload 'batch' does not exist"},
		{[]string{"web", "nope"}, nil, "workload 'nope' does not exist"},
	}
	for _, tt := range tests {
		got, err := ResolveInstances(cs, tt.names)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%v: err = %v, want %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		var s []string
		for _, n := range got {
			s = append(s, n.String())
		}
		if err != nil || !reflect.DeepEqual(s, tt.want) {
			t.Errorf("%v: got %v, %v; want %v", tt.names, s, err, tt.want)
		}
	}
}

func TestBuildLogsRequest(t *testing.T) {
	ns := []state.InstanceName{inst("web.1.agent_A")}
	tests := []struct {
		name string
		opts LogsOptions
		want string
	}{
		{"defaults leave everything unset", LogsOptions{Tail: -1}, "follow=<nil> tail=<nil> since=<nil> until=<nil>"},
		{"all set", LogsOptions{Follow: true, Tail: 10, Since: "2026-01-01T00:00:00Z", Until: "2026-01-02T00:00:00Z"}, "follow=true tail=10 since=2026-01-01T00:00:00Z until=2026-01-02T00:00:00Z"},
		{"tail zero is a tail", LogsOptions{Tail: 0}, "follow=<nil> tail=0 since=<nil> until=<nil>"},
	}
	show := func(r *ankbase.LogsRequest) string {
		f := func(v any, set bool) string {
			if !set {
				return "<nil>"
			}
			return fmt.Sprint(v)
		}
		return "follow=" + f(r.GetFollow(), r.Follow != nil) + " tail=" + f(r.GetTail(), r.Tail != nil) +
			" since=" + f(r.GetSince(), r.Since != nil) + " until=" + f(r.GetUntil(), r.Until != nil)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := BuildLogsRequest(ns, tt.opts)
			if got := show(r); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if len(r.GetWorkloadNames()) != 1 || rpc.InstanceNameFromProto(r.GetWorkloadNames()[0]) != ns[0] {
				t.Fatalf("workload names = %v", r.GetWorkloadNames())
			}
		})
	}
}

func TestFormatLogLine(t *testing.T) {
	// swdd~cli-outputs-logs-in-specific-format~1
	e := &ankbase.LogEntry{WorkloadName: rpc.InstanceNameToProto(inst("web.1.agent_A")), Message: "hello world"}
	if got := FormatLogLine(e, false); got != "hello world\n" {
		t.Errorf("without name: %q", got)
	}
	if got := FormatLogLine(e, true); got != "web hello world\n" {
		t.Errorf("with name: %q", got)
	}
}

func TestLogCampaign(t *testing.T) {
	// swdd~cli-stops-log-output-for-specific-workloads~1
	a, b := inst("web.1.agent_A"), inst("db.2.agent_B")
	c := newLogCampaign([]state.InstanceName{a, b})
	err := c.accept(&ankbase.LogsRequestAccepted{WorkloadNames: []*ankbase.WorkloadInstanceName{rpc.InstanceNameToProto(a)}})
	if err == nil || err.Error() != "workload 'db' is not accepted by the server to receive logs from" {
		t.Fatalf("partial acceptance: %v", err)
	}
	if err := c.accept(&ankbase.LogsRequestAccepted{WorkloadNames: []*ankbase.WorkloadInstanceName{rpc.InstanceNameToProto(b), rpc.InstanceNameToProto(a)}}); err != nil {
		t.Fatal(err)
	}
	if c.stop(rpc.InstanceNameToProto(a)) {
		t.Fatal("done after one of two sources stopped")
	}
	if c.stop(rpc.InstanceNameToProto(a)) {
		t.Fatal("a repeated stop closed another source")
	}
	if !c.stop(rpc.InstanceNameToProto(b)) {
		t.Fatal("not done after both sources stopped")
	}
}
