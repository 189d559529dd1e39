package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// LogsOptions are the arguments of `logs`.
type LogsOptions struct {
	Workloads []string
	Follow    bool
	// Tail is the number of last lines per workload; negative means all.
	Tail int
	// Since and Until bound the lines by time (RFC 3339); empty is open.
	Since, Until string
	// Names prefixes every line with its workload name, which happens
	// anyway when the logs of more than one instance are shown.
	Names bool
}

// ResolveInstances maps workload names to all their instances known in
// the workload states of cs, in a stable order.
// swdd~cli-uses-workload-states-to-sample-workload-to-instance-names~1
func ResolveInstances(cs state.Tree, workloads []string) ([]state.InstanceName, error) {
	byName := map[string][]state.InstanceName{}
	for _, ws := range workloadStates(cs) {
		byName[ws.Instance.WorkloadName] = append(byName[ws.Instance.WorkloadName], ws.Instance)
	}
	seen := map[string]bool{}
	var out []state.InstanceName
	for _, w := range workloads {
		ns, ok := byName[w]
		if !ok {
			return nil, fmt.Errorf("workload '%s' does not exist", w)
		}
		for _, n := range ns {
			if !seen[n.String()] {
				seen[n.String()] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// BuildLogsRequest turns the options into the wire request; unset options
// stay unset, so the agent applies its defaults.
func BuildLogsRequest(instances []state.InstanceName, o LogsOptions) *ankbase.LogsRequest {
	r := &ankbase.LogsRequest{}
	for _, n := range instances {
		r.WorkloadNames = append(r.WorkloadNames, rpc.InstanceNameToProto(n))
	}
	if o.Follow {
		t := true
		r.Follow = &t
	}
	if o.Tail >= 0 {
		t := int32(o.Tail)
		r.Tail = &t
	}
	if o.Since != "" {
		r.Since = &o.Since
	}
	if o.Until != "" {
		r.Until = &o.Until
	}
	return r
}

// FormatLogLine is one printed log line: the message, led by the workload
// name when names are shown.
// swdd~cli-outputs-logs-in-specific-format~1
func FormatLogLine(e *ankbase.LogEntry, withName bool) string {
	if withName {
		return e.GetWorkloadName().GetWorkloadName() + " " + e.GetMessage() + "\n"
	}
	return e.GetMessage() + "\n"
}

// logCampaign tracks which requested log sources are still open.
type logCampaign struct {
	open map[string]bool
}

func newLogCampaign(instances []state.InstanceName) *logCampaign {
	c := &logCampaign{open: map[string]bool{}}
	for _, n := range instances {
		c.open[n.String()] = true
	}
	return c
}

// accept checks that the server took every requested source.
func (c *logCampaign) accept(a *ankbase.LogsRequestAccepted) error {
	got := map[string]bool{}
	for _, n := range a.GetWorkloadNames() {
		got[rpc.InstanceNameFromProto(n).String()] = true
	}
	for _, k := range state.SortedKeys(c.open) {
		if !got[k] {
			n, _ := state.ParseInstanceName(k)
			return fmt.Errorf("workload '%s' is not accepted by the server to receive logs from", n.WorkloadName)
		}
	}
	return nil
}

// stop closes one source and reports whether all are closed.
// swdd~cli-stops-log-output-for-specific-workloads~1
func (c *logCampaign) stop(n *ankbase.WorkloadInstanceName) bool {
	delete(c.open, rpc.InstanceNameFromProto(n).String())
	return len(c.open) == 0
}

// Logs prints the logs of the named workloads until every source has
// ended, or, following, until ctx ends (Ctrl-C); then it cancels the
// campaign on the server.
// swdd~cli-provides-workload-logs~1
// swdd~cli-streams-logs-from-the-server~1
// swdd~cli-sends-logs-cancel-request-upon-termination~1
func (s *Session) Logs(ctx context.Context, o LogsOptions) error {
	cs, err := s.CompleteState(ctx, []string{"workloadStates"})
	if err != nil {
		return err
	}
	instances, err := ResolveInstances(cs, o.Workloads)
	if err != nil {
		return err
	}
	req := &ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: BuildLogsRequest(instances, o)}}
	ch, cancel, err := s.Conn.Subscribe(ctx, req)
	if err != nil {
		return err
	}
	defer cancel()
	id := req.RequestId
	stop := func() {
		s.cancelRequest(id, &ankbase.Request{RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
	}
	campaign := newLogCampaign(instances)
	withNames := o.Names || len(instances) > 1
	accepted := false
	acceptTimer := clock.NewTimer(s.clock(), s.timeout())
	defer acceptTimer.Stop()
	for {
		var resp *ankbase.Response
		var ok bool
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-acceptTimer.C:
			if !accepted {
				stop()
				return fmt.Errorf("no response from the server within %v", s.timeout())
			}
			continue
		case resp, ok = <-ch:
		}
		if !ok {
			if ctx.Err() != nil {
				stop()
				return nil
			}
			return s.connErr()
		}
		switch {
		case resp.GetError() != nil:
			return fmt.Errorf("logs request failed: %s", resp.GetError().GetMessage())
		case resp.GetLogsRequestAccepted() != nil:
			accepted = true
			s.debugf("logs request %s accepted for %d source(s)", id, len(resp.GetLogsRequestAccepted().GetWorkloadNames()))
			if err := campaign.accept(resp.GetLogsRequestAccepted()); err != nil {
				stop()
				return err
			}
			if len(campaign.open) == 0 {
				return nil
			}
		case resp.GetLogEntriesResponse() != nil:
			for _, e := range resp.GetLogEntriesResponse().GetLogEntries() {
				if _, err := io.WriteString(s.Out, FormatLogLine(e, withNames)); err != nil {
					stop()
					return err
				}
			}
		case resp.GetLogsStopResponse() != nil:
			if campaign.stop(resp.GetLogsStopResponse().GetWorkloadName()) {
				return nil
			}
		}
	}
}
