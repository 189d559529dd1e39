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
//
// When the stream ends under it, it resumes on the new leader (resume.go)
// without losing or doubling a line: the log a source gives for the same
// since and until grows only at its end, so the new campaign asks for it
// from the start and the lines already printed, counted per instance,
// are skipped. A --tail with --follow is first read to its end without
// following, to count the lines before the tail; with a Reconnect only,
// for without one nothing resumes.
//
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
	withNames := o.Names || len(instances) > 1
	// printed counts, per instance, the entries of its selection before
	// the next one to print.
	printed := map[string]int{}
	if o.Follow && o.Tail >= 0 && s.Reconnect != nil {
		if err := s.logsBeforeFollow(ctx, instances, o, withNames, printed); err != nil || ctx.Err() != nil {
			return err
		}
		o.Tail = -1
	}
	open := instances
	for {
		r := &logsRun{s: s, withNames: withNames, printed: printed, seen: map[string]int{}}
		req := BuildLogsRequest(open, o)
		ended, err := r.run(ctx, req, open)
		if ended || err != nil {
			return err
		}
		// The stream ended: ask the new leader for the sources still open,
		// from the start of their selection.
		if err := s.resume(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if open = r.stillOpen(open); len(open) == 0 {
			return nil
		}
		o.Tail = -1
	}
}

// logsBeforeFollow reads the selection of every source to its current
// end without following, counts its entries into printed and prints the
// last o.Tail of each, for a --tail with --follow: the campaign that
// follows then starts from the start of the selection and skips the
// counted ones, which a resumed one can do again.
func (s *Session) logsBeforeFollow(ctx context.Context, instances []state.InstanceName, o LogsOptions, withNames bool, printed map[string]int) error {
	keep := o.Tail
	o.Follow, o.Tail = false, -1
	tails := map[string]*lineRing{}
	done := map[string]bool{}
	for {
		var open []state.InstanceName
		for _, n := range instances {
			if !done[n.String()] {
				open = append(open, n)
			}
		}
		if len(open) == 0 {
			return nil
		}
		for _, n := range open {
			tails[n.String()] = &lineRing{max: keep}
		}
		r := &logsRun{s: s, withNames: withNames, printed: map[string]int{}, seen: map[string]int{},
			hold: func(k, line string) { tails[k].push(line) },
			stopped: func(k string) error {
				done[k] = true
				printed[k] = tails[k].total
				for _, line := range tails[k].lines() {
					if _, err := io.WriteString(s.Out, line); err != nil {
						return err
					}
				}
				return nil
			}}
		ended, err := r.run(ctx, BuildLogsRequest(open, o), open)
		if ended || err != nil {
			return err
		}
		if err := s.resume(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// logsRun is one log campaign of Logs, on one stream.
type logsRun struct {
	s         *Session
	withNames bool
	// printed counts, per instance, the entries already printed (or, for
	// logsBeforeFollow, counted); seen those of this campaign so far.
	// Entries up to printed are skipped.
	printed, seen map[string]int
	// hold, when set, takes the lines instead of printing them, and
	// stopped is called when a source stops.
	hold    func(key, line string)
	stopped func(key string) error
	// stops are the instances whose source stopped in this campaign.
	stops map[string]bool
}

// run runs the campaign req asks for until every source stopped, ctx
// ended or the stream ended; ended is false only for the last, which
// resume mends.
func (r *logsRun) run(ctx context.Context, req *ankbase.LogsRequest, instances []state.InstanceName) (ended bool, err error) {
	s := r.s
	r.stops = map[string]bool{}
	wrapped := &ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: req}}
	ch, cancel, err := s.Conn.Subscribe(ctx, wrapped)
	if err != nil {
		if s.Reconnect != nil && s.streamEnded(err) {
			return false, nil
		}
		return true, err
	}
	defer cancel()
	id := wrapped.RequestId
	stop := func() {
		s.cancelRequest(id, &ankbase.Request{RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
	}
	campaign := newLogCampaign(instances)
	accepted := false
	acceptTimer := clock.NewTimer(s.clock(), s.timeout())
	defer acceptTimer.Stop()
	for {
		var resp *ankbase.Response
		var ok bool
		select {
		case <-ctx.Done():
			stop()
			return true, nil
		case <-acceptTimer.C:
			if !accepted {
				stop()
				return true, fmt.Errorf("no response from the server within %v", s.timeout())
			}
			continue
		case resp, ok = <-ch:
		}
		if !ok {
			if ctx.Err() != nil {
				stop()
				return true, nil
			}
			if s.Reconnect != nil {
				return false, nil
			}
			return true, s.connErr()
		}
		switch {
		case resp.GetError() != nil:
			return true, fmt.Errorf("logs request failed: %s", resp.GetError().GetMessage())
		case resp.GetLogsRequestAccepted() != nil:
			accepted = true
			s.debugf("logs request %s accepted for %d source(s)", id, len(resp.GetLogsRequestAccepted().GetWorkloadNames()))
			if err := campaign.accept(resp.GetLogsRequestAccepted()); err != nil {
				stop()
				return true, err
			}
			if len(campaign.open) == 0 {
				return true, nil
			}
		case resp.GetLogEntriesResponse() != nil:
			for _, e := range resp.GetLogEntriesResponse().GetLogEntries() {
				if err := r.entry(e); err != nil {
					stop()
					return true, err
				}
			}
		case resp.GetLogsStopResponse() != nil:
			n := resp.GetLogsStopResponse().GetWorkloadName()
			k := rpc.InstanceNameFromProto(n).String()
			r.stops[k] = true
			if r.stopped != nil {
				if err := r.stopped(k); err != nil {
					return true, err
				}
			}
			if campaign.stop(n) {
				return true, nil
			}
		}
	}
}

// entry prints (or holds) one entry unless an earlier campaign printed it.
func (r *logsRun) entry(e *ankbase.LogEntry) error {
	k := rpc.InstanceNameFromProto(e.GetWorkloadName()).String()
	r.seen[k]++
	if r.seen[k] <= r.printed[k] {
		return nil
	}
	r.printed[k]++
	line := FormatLogLine(e, r.withNames)
	if r.hold != nil {
		r.hold(k, line)
		return nil
	}
	_, err := io.WriteString(r.s.Out, line)
	return err
}

// stillOpen are the instances whose source did not stop.
func (r *logsRun) stillOpen(instances []state.InstanceName) []state.InstanceName {
	var out []state.InstanceName
	for _, n := range instances {
		if !r.stops[n.String()] {
			out = append(out, n)
		}
	}
	return out
}

// lineRing keeps the newest max lines, and counts them all.
type lineRing struct {
	max   int
	buf   []string
	total int
}

func (l *lineRing) push(line string) {
	l.total++
	if l.max <= 0 {
		return
	}
	if len(l.buf) == l.max {
		l.buf = l.buf[1:]
	}
	l.buf = append(l.buf, line)
}

func (l *lineRing) lines() []string { return l.buf }
