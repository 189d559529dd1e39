package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// History runs `history`, `history show` and `get timeline` against the
// History service (docs/history.md).
type History struct {
	Client grapnelpb.HistoryClient
	Out    io.Writer
	Quiet  bool
	// Location is the time zone times are printed in (local when nil).
	Location *time.Location
	// SinceTime and UntilTime bound List to the transactions the leader
	// timed within them, both included; zero is no bound. A transaction
	// without a time (written before the history had times) is outside
	// any bound.
	SinceTime, UntilTime time.Time
}

// ParseTimeBound reads the value of a time flag (--since-time,
// --until-time): an RFC 3339 time, or a duration such as 10m or 1h30m
// that long before now.
func ParseTimeBound(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%w: --%s %q: an RFC 3339 time (2026-11-28T07:09:21Z) or a duration before now (10m, 1h30m) is required", ErrBadArgument, flag, v)
	}
	return now.Add(-d), nil
}

// inTime reports whether a transaction's time is within the bounds.
func (h *History) inTime(ms int64) bool {
	if h.SinceTime.IsZero() && h.UntilTime.IsZero() {
		return true
	}
	if ms == 0 {
		return false
	}
	t := time.UnixMilli(ms)
	return !t.Before(h.SinceTime.Truncate(time.Millisecond)) && (h.UntilTime.IsZero() || !t.After(h.UntilTime))
}

// historyColumns are the columns of `history`.
var historyColumns = []string{"TXN", "TIME", "KIND", "REQUESTER", "CHANGES"}

// maxHistoryPages bounds the pages List fetches: the server keeps at
// most its --history-max-entries, a thousand a page.
const maxHistoryPages = 1100

// List prints the transactions after since (all when zero), only those
// of workload when it is set.
func (h *History) List(ctx context.Context, since uint64, workload, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	if !h.SinceTime.IsZero() && !h.UntilTime.IsZero() && h.UntilTime.Before(h.SinceTime) {
		return fmt.Errorf("%w: --until-time %s is before --since-time %s", ErrBadArgument,
			h.UntilTime.Format(time.RFC3339), h.SinceTime.Format(time.RFC3339))
	}
	var txs []*grapnelpb.Transaction
	for range maxHistoryPages {
		resp, err := h.Client.List(ctx, &grapnelpb.HistoryListRequest{Since: since, Workload: workload})
		if err != nil {
			return err
		}
		page := resp.GetTransactions()
		for _, tx := range page {
			if h.inTime(tx.GetTimeMs()) {
				txs = append(txs, tx)
			}
		}
		if len(page) == 0 || page[len(page)-1].GetSeq() >= resp.GetLastSeq() {
			break
		}
		since = page[len(page)-1].GetSeq()
	}
	if output == "table" || output == "" {
		t := Table{Headers: historyColumns}
		for _, tx := range txs {
			t.Rows = append(t.Rows, []string{strconv.FormatUint(tx.GetSeq(), 10), h.time(tx.GetTimeMs()), tx.GetKind(), tx.GetRequester(), summary(tx)})
		}
		_, err := io.WriteString(h.Out, t.Render(0, FitNone, -1)+"\n")
		return err
	}
	list := make([]any, 0, len(txs))
	for _, tx := range txs {
		list = append(list, txTree(tx))
	}
	return h.encode(map[string]any{"transactions": list}, output)
}

// Show prints one transaction in full; the table form is a diff of the
// changed fields.
func (h *History) Show(ctx context.Context, seq string, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n == 0 {
		return fmt.Errorf("%w: TXN %q: a transaction number of the history (1, 2, ...; grapnel history lists them) is required", ErrBadArgument, seq)
	}
	tx, err := h.Client.Get(ctx, &grapnelpb.HistoryGetRequest{Seq: n})
	if err != nil {
		return err
	}
	steps, err := h.steps(ctx, tx)
	if err != nil {
		return err
	}
	if output != "table" && output != "" {
		m := txTree(tx)
		if len(steps) > 0 {
			m["steps"] = stepsTree(steps)
		}
		return h.encode(m, output)
	}
	_, err = io.WriteString(h.Out, h.diff(tx)+stepsText(steps))
	return err
}

// steps reads the timelines of the workloads tx names and derives its
// executed steps (StepsOf).
func (h *History) steps(ctx context.Context, tx *grapnelpb.Transaction) ([]Step, error) {
	timelines := map[string][]*grapnelpb.TimelineEvent{}
	for _, w := range tx.GetWorkloads() {
		if _, done := timelines[w.GetName()]; done || (w.GetInstance() == "" && w.GetOldInstance() == "") {
			continue
		}
		resp, err := h.Client.Timeline(ctx, &grapnelpb.TimelineRequest{Workload: w.GetName()})
		if err != nil {
			return nil, err
		}
		timelines[w.GetName()] = resp.GetEvents()
	}
	return StepsOf(tx, timelines), nil
}

// stepsText is the steps as a table under `history show`.
func stepsText(steps []Step) string {
	if len(steps) == 0 {
		return ""
	}
	t := Table{Headers: []string{"STEP", "WORKLOAD", "AGENT", "INSTANCE ID", "RESULT", "AFTER", "ERROR"}}
	for _, s := range steps {
		result, after := s.Result, ""
		switch {
		case result == "":
			result = "(no state reported)"
		case !s.Done:
			result = "not done: " + result
		}
		if s.Result != "" {
			after = (time.Duration(s.DurationMs) * time.Millisecond).String()
		}
		t.Rows = append(t.Rows, []string{s.Action, s.Workload, s.Agent, instanceID(s.Instance), result, after, s.Error})
	}
	return "\nexecuted steps (from the workload states recorded after it):\n" + t.Render(0, FitNone, -1) + "\n"
}

func stepsTree(steps []Step) []any {
	out := make([]any, 0, len(steps))
	for _, s := range steps {
		m := map[string]any{"step": s.Action, "workload": s.Workload, "agent": s.Agent, "instance": s.Instance, "done": s.Done}
		putIf(m, "result", s.Result)
		putIf(m, "error", s.Error)
		if s.Result != "" {
			m["durationMs"] = s.DurationMs
		}
		out = append(out, m)
	}
	return out
}

// Timeline prints a workload's desired-state changes and execution-state
// transitions, oldest first.
func (h *History) Timeline(ctx context.Context, name, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	if !state.ValidName(name) {
		return fmt.Errorf("%w: workload name %q uses only [a-zA-Z0-9_-]", ErrBadArgument, name)
	}
	resp, err := h.Client.Timeline(ctx, &grapnelpb.TimelineRequest{Workload: name})
	if err != nil {
		return err
	}
	if output == "table" || output == "" {
		t := Table{Headers: []string{"TIME", "TXN", "EVENT", "AGENT", "INSTANCE ID", "DETAIL"}}
		for _, ev := range resp.GetEvents() {
			seq, what, detail := "", ev.GetState(), ""
			if ev.GetSeq() != 0 {
				seq = strconv.FormatUint(ev.GetSeq(), 10)
				what = ev.GetOp()
				detail = strings.Join(ev.GetFields(), ", ")
				if k := ev.GetKind(); k == string(state.TxDecision) || k == string(state.TxRepair) || k == string(state.TxPlacement) || k == string(state.TxAgentMode) {
					what, detail = ev.GetState(), ev.GetReason()
				} else if ev.GetRequester() != "" {
					detail = strings.TrimSpace("by " + ev.GetRequester() + " " + detail)
				}
			}
			t.Rows = append(t.Rows, []string{h.time(ev.GetTimeMs()), seq, what, ev.GetAgent(), instanceID(ev.GetInstance()), detail})
		}
		_, err := io.WriteString(h.Out, t.Render(0, FitNone, -1)+"\n")
		return err
	}
	events := make([]any, 0, len(resp.GetEvents()))
	for _, ev := range resp.GetEvents() {
		m := map[string]any{"time": h.time(ev.GetTimeMs()), "index": ev.GetIndex(), "kind": ev.GetKind()}
		putIf(m, "txn", ev.GetSeq())
		for k, v := range map[string]string{"op": ev.GetOp(), "requester": ev.GetRequester(), "instance": ev.GetInstance(),
			"agent": ev.GetAgent(), "state": ev.GetState(), "reason": ev.GetReason()} {
			putIf(m, k, v)
		}
		if len(ev.GetFields()) > 0 {
			m["fields"] = strings.Join(ev.GetFields(), ", ")
		}
		events = append(events, m)
	}
	return h.encode(map[string]any{"workload": name, "events": events}, output)
}

func checkOutput(output string) error {
	switch output {
	case "", "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("%w: -o %q: use table, json or yaml", ErrBadArgument, output)
}

func (h *History) encode(tree map[string]any, output string) error {
	return WriteTree(h.Out, output, tree, historyOrder)
}

// historyOrder orders the keys of the history's JSON and YAML as the
// table reads: what, when, who, then the changes.
func historyOrder(path []string) []string {
	parent := ""
	switch n := len(path); {
	case n == 0:
		return []string{"workload", "txn", "index", "timeMs", "kind", "requester", "updateMask", "reason", "count", "apiVersion", "workloads", "configs", "steps", "events", "transactions"}
	case n >= 2:
		parent = path[n-2]
	}
	switch parent {
	case "transactions":
		return []string{"txn", "index", "timeMs", "kind", "requester", "updateMask", "reason", "count", "apiVersion", "workloads", "configs"}
	case "workloads":
		return []string{"name", "op", "oldInstance", "instance", "states", "changes"}
	case "changes":
		return []string{"field", "old", "new"}
	case "configs":
		return []string{"key", "op"}
	case "steps":
		return []string{"step", "workload", "agent", "instance", "done", "result", "durationMs", "error"}
	case "events":
		return []string{"time", "index", "txn", "kind", "op", "agent", "instance", "state", "requester", "fields", "reason"}
	}
	return nil
}

// time is a leader time in RFC 3339 with milliseconds; "-" for a record
// written before the history had times.
func (h *History) time(ms int64) string {
	if ms == 0 {
		return "-"
	}
	loc := h.Location
	if loc == nil {
		loc = time.Local
	}
	return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05.000Z07:00")
}

// summary is the CHANGES cell: "+web ~db(runtimeConfig) -old cfg:+k".
func summary(tx *grapnelpb.Transaction) string {
	if tx.GetKind() == string(state.TxRejected) {
		s := tx.GetReason()
		if tx.GetCount() > 1 {
			s += fmt.Sprintf(" (×%d)", tx.GetCount())
		}
		return s
	}
	var parts []string
	for _, w := range tx.GetWorkloads() {
		switch w.GetOp() {
		case string(state.OpAdded):
			parts = append(parts, "+"+w.GetName())
		case string(state.OpDeleted):
			parts = append(parts, "-"+w.GetName())
		case string(state.OpStates):
			parts = append(parts, w.GetName()+"→"+strings.Join(w.GetStates(), ","))
		default:
			var fields []string
			for _, c := range w.GetChanges() {
				fields = append(fields, c.GetField())
			}
			parts = append(parts, "~"+w.GetName()+"("+strings.Join(fields, ",")+")")
		}
	}
	for _, c := range tx.GetConfigs() {
		sign := map[string]string{string(state.OpAdded): "+", string(state.OpDeleted): "-"}[c.GetOp()]
		if sign == "" {
			sign = "~"
		}
		parts = append(parts, "config "+sign+c.GetKey())
	}
	if tx.GetApiVersion() != "" {
		parts = append(parts, "apiVersion "+tx.GetApiVersion())
	}
	if k := tx.GetKind(); (k == string(state.TxDecision) || k == string(state.TxRepair) || k == string(state.TxPlacement) || k == string(state.TxAgentMode)) && tx.GetReason() != "" {
		// The reason introduces the changes; with none it stands alone
		// (an AgentMode, which changes no workload), without a colon.
		if len(parts) == 0 {
			return tx.GetReason()
		}
		parts = append([]string{tx.GetReason() + ":"}, parts...)
	}
	return strings.Join(parts, " ")
}

// diff is `history show` as text: the header, then per workload its
// instance names and each changed field as -old/+new lines.
func (h *History) diff(tx *grapnelpb.Transaction) string {
	var b strings.Builder
	fmt.Fprintf(&b, "transaction %d (%s) at %s, Raft index %d\n", tx.GetSeq(), tx.GetKind(), h.time(tx.GetTimeMs()), tx.GetIndex())
	if tx.GetRequester() != "" {
		fmt.Fprintf(&b, "requester:   %s\n", tx.GetRequester())
	}
	if len(tx.GetUpdateMask()) > 0 {
		fmt.Fprintf(&b, "update mask: %s\n", strings.Join(tx.GetUpdateMask(), ", "))
	}
	if tx.GetReason() != "" {
		fmt.Fprintf(&b, "reason:      %s\n", tx.GetReason())
	}
	if tx.GetCount() > 1 {
		fmt.Fprintf(&b, "count:       %d equal requests\n", tx.GetCount())
	}
	if tx.GetApiVersion() != "" {
		fmt.Fprintf(&b, "apiVersion:  %s\n", tx.GetApiVersion())
	}
	for _, w := range tx.GetWorkloads() {
		fmt.Fprintf(&b, "\nworkload %s: %s\n", w.GetName(), w.GetOp())
		if w.GetOldInstance() != "" && w.GetOldInstance() != w.GetInstance() {
			fmt.Fprintf(&b, "  - instance %s\n", w.GetOldInstance())
		}
		if w.GetInstance() != "" {
			sign := "+"
			if w.GetInstance() == w.GetOldInstance() || w.GetOp() == string(state.OpStates) {
				sign = " "
			}
			fmt.Fprintf(&b, "  %s instance %s\n", sign, w.GetInstance())
		}
		for _, s := range w.GetStates() {
			fmt.Fprintf(&b, "    state → %s\n", s)
		}
		for _, c := range w.GetChanges() {
			fmt.Fprintf(&b, "  %s:\n", c.GetField())
			if c.GetOld() != "" {
				fmt.Fprintf(&b, "    - %s\n", indentLines(c.GetOld(), "      "))
			}
			if c.GetNew() != "" {
				fmt.Fprintf(&b, "    + %s\n", indentLines(c.GetNew(), "      "))
			}
		}
	}
	if len(tx.GetConfigs()) > 0 {
		b.WriteString("\nconfigs:\n")
		for _, c := range tx.GetConfigs() {
			fmt.Fprintf(&b, "  %s: %s\n", c.GetKey(), c.GetOp())
		}
	}
	return b.String()
}

func indentLines(s, indent string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+indent)
}

// instanceID is the id part of an instance name, shortened for a table.
func instanceID(name string) string {
	in, err := state.ParseInstanceName(name)
	if err != nil {
		return name
	}
	if len(in.ID) > 12 {
		return in.ID[:12]
	}
	return in.ID
}

// txTree is a transaction for JSON and YAML.
func txTree(tx *grapnelpb.Transaction) map[string]any {
	m := map[string]any{"txn": tx.GetSeq(), "index": tx.GetIndex(), "timeMs": tx.GetTimeMs(), "kind": tx.GetKind()}
	putIf(m, "requester", tx.GetRequester())
	putIf(m, "reason", tx.GetReason())
	putIf(m, "apiVersion", tx.GetApiVersion())
	putIf(m, "count", uint64(tx.GetCount()))
	if len(tx.GetUpdateMask()) > 0 {
		m["updateMask"] = strs(tx.GetUpdateMask())
	}
	if len(tx.GetWorkloads()) > 0 {
		ws := []any{}
		for _, w := range tx.GetWorkloads() {
			wm := map[string]any{"name": w.GetName(), "op": w.GetOp()}
			putIf(wm, "instance", w.GetInstance())
			putIf(wm, "oldInstance", w.GetOldInstance())
			if len(w.GetStates()) > 0 {
				wm["states"] = strs(w.GetStates())
			}
			if len(w.GetChanges()) > 0 {
				cs := []any{}
				for _, c := range w.GetChanges() {
					cm := map[string]any{"field": c.GetField()}
					putIf(cm, "old", c.GetOld())
					putIf(cm, "new", c.GetNew())
					cs = append(cs, cm)
				}
				wm["changes"] = cs
			}
			ws = append(ws, wm)
		}
		m["workloads"] = ws
	}
	if len(tx.GetConfigs()) > 0 {
		cs := []any{}
		for _, c := range tx.GetConfigs() {
			cs = append(cs, map[string]any{"key": c.GetKey(), "op": c.GetOp()})
		}
		m["configs"] = cs
	}
	return m
}

func strs(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// putIf sets a key unless the value is zero.
func putIf[V comparable](m map[string]any, k string, v V) {
	var zero V
	if v != zero {
		m[k] = v
	}
}
