package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// ErrRejectedPlan is returned by a dry-run whose update would be
// rejected, after the plan and its reasons are printed.
var ErrRejectedPlan = errors.New("the update would be rejected")

// errNoPlanService explains a dry-run or --plan-revision without a
// connection to Grapnel's Plan service.
var errNoPlanService = errors.New("dry-runs, --plan-revision and --expect-revision need Grapnel's plan service, which this connection does not reach")

// Plan output formats: a readable text of tables, or the plan as data.
const (
	PlanTable = "table"
	PlanYAML  = "yaml"
	PlanJSON  = "json"
)

// ParsePlanOutput accepts table, yaml and json.
func ParsePlanOutput(s string) (string, error) {
	switch f := strings.ToLower(s); f {
	case PlanTable, PlanYAML, PlanJSON:
		return f, nil
	}
	return "", fmt.Errorf("%w: -o %q: use table, yaml or json", ErrBadArgument, s)
}

// sendUpdate makes an update: through the Ankaios stream, or, with
// ExpectSeq (--plan-revision), through the Plan service, only if the
// desired state is still at that revision; with ExpectRevision only if
// what it changes is unchanged since that revision.
func (s *Session) sendUpdate(ctx context.Context, newState *ankbase.CompleteState, masks []string) (*ankbase.UpdateStateSuccess, error) {
	if s.ExpectSeq == nil && s.ExpectRevision == nil {
		return s.updateState(ctx, newState, masks)
	}
	if s.Plan == nil {
		return nil, errNoPlanService
	}
	req := &grapnelpb.ApplyRequest{Update: &ankbase.UpdateStateRequest{NewState: newState, UpdateMask: masks}}
	if s.ExpectRevision != nil {
		s.debugf("sending an update with masks %q at revision %d", masks, *s.ExpectRevision)
		req.ExpectedRevision = s.ExpectRevision
	} else {
		s.debugf("sending an update with masks %q if the desired state is at revision %d", masks, *s.ExpectSeq)
		req.ExpectedSeq = *s.ExpectSeq
	}
	resp, err := s.Plan.Apply(ctx, req)
	if err != nil {
		return nil, err
	}
	s.debugf("the desired state is at revision %d", resp.GetSeq())
	return &ankbase.UpdateStateSuccess{AddedWorkloads: resp.GetAddedWorkloads(), DeletedWorkloads: resp.GetDeletedWorkloads()}, nil
}

// dryRun asks the leader for the plan of an update and prints it in
// PlanOutput, with the command that applies it unless the state changes
// first. A plan the leader would reject is printed with every reason,
// and ErrRejectedPlan returned.
func (s *Session) dryRun(ctx context.Context, newState *ankbase.CompleteState, masks []string) error {
	if s.Plan == nil {
		return errNoPlanService
	}
	s.debugf("planning an update with masks %q", masks)
	resp, err := s.Plan.DryRun(ctx, &grapnelpb.PlanRequest{Update: &ankbase.UpdateStateRequest{NewState: newState, UpdateMask: masks}})
	if err != nil {
		return err
	}
	hint := ""
	if resp.GetAccepted() && resp.GetChanged() && s.planHint != nil {
		hint = s.planHint(resp.GetSeq())
	}
	switch s.PlanOutput {
	case PlanYAML, PlanJSON:
		var text string
		if s.PlanOutput == PlanJSON {
			text, err = EncodeJSON(PlanTree(resp), planOrder, true)
		} else {
			text, err = EncodeYAML(PlanTree(resp), planOrder)
		}
		if err != nil {
			return err
		}
		if _, err := io.WriteString(s.Out, text); err != nil {
			return err
		}
		if hint != "" && !s.Quiet {
			fmt.Fprintf(s.Err, "To apply this plan unless the state changes first:\n  %s\n", hint)
		}
	default:
		if _, err := io.WriteString(s.Out, PlanText(resp, hint, s.Width)); err != nil {
			return err
		}
	}
	if !resp.GetAccepted() {
		return fmt.Errorf("%w (%d reason(s))", ErrRejectedPlan, len(resp.GetRejections()))
	}
	return nil
}

// planRevisionHint is the command that applies a plan: verb and its
// arguments with --plan-revision inserted after the verb.
func planRevisionHint(verb string, args ...string) func(uint64) string {
	return func(rev uint64) string {
		parts := append([]string{"grapnel", verb, "--plan-revision", strconv.FormatUint(rev, 10)}, args...)
		return strings.Join(parts, " ")
	}
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PlanText is a plan as text for people: its status and reasons, the
// workloads, the config items, each agent's steps in order, the
// warnings, and the command that applies it.
func PlanText(resp *grapnelpb.PlanResponse, hint string, width int) string {
	var b strings.Builder
	verdict := "the update would be accepted"
	switch {
	case !resp.GetAccepted():
		verdict = "the update would be REJECTED"
	case !resp.GetChanged():
		verdict = "the update would change nothing"
	}
	fmt.Fprintf(&b, "Plan at revision %d: %s.\n", resp.GetSeq(), verdict)
	if rs := resp.GetRejections(); len(rs) > 0 {
		b.WriteString("\nRejected because:\n")
		for _, r := range rs {
			fmt.Fprintf(&b, "  - %s\n", r.GetMessage())
		}
	}
	if v := resp.GetApiVersion(); v != "" {
		fmt.Fprintf(&b, "\napiVersion becomes %s\n", v)
	}
	if ws := resp.GetWorkloads(); len(ws) > 0 {
		t := Table{Headers: []string{"CHANGE", "WORKLOAD", "AGENT", "INSTANCE", "DETAIL"}}
		for _, w := range ws {
			inst := w.GetInstance()
			detail := strings.Join(w.GetCauses(), ", ")
			switch w.GetChange() {
			case "deleted":
				inst = w.GetOldInstance()
				if w.GetServerRemoves() {
					detail = "removed by the server (never started)"
				}
			case "updated":
				if w.GetInstance() == w.GetOldInstance() {
					detail = joinNonEmpty(detail, "same instance")
				}
			}
			t.Rows = append(t.Rows, []string{w.GetChange(), w.GetName(), w.GetAgent(), shortInstance(inst), detail})
		}
		b.WriteString("\nWorkloads:\n")
		b.WriteString(indent(t.Render(width, FitNone, -1)))
		for _, w := range ws {
			if len(w.GetFields()) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n%s %s:\n", w.GetName(), w.GetChange())
			for _, f := range w.GetFields() {
				fmt.Fprintf(&b, "  %s: %s -> %s\n", f.GetPath(), orAbsent(f.GetOld()), orAbsent(f.GetNew()))
			}
		}
	}
	if cs := resp.GetConfigs(); len(cs) > 0 {
		t := Table{Headers: []string{"CHANGE", "CONFIG"}}
		for _, c := range cs {
			t.Rows = append(t.Rows, []string{c.GetChange(), c.GetKey()})
		}
		b.WriteString("\nConfigs:\n")
		b.WriteString(indent(t.Render(width, FitNone, -1)))
	}
	if as := resp.GetAgents(); len(as) > 0 {
		t := Table{Headers: []string{"AGENT", "WAVE", "ACTION", "WORKLOAD", "WAITS FOR"}}
		for _, a := range as {
			for _, st := range a.GetSteps() {
				var waits []string
				for _, w := range st.GetWaitFor() {
					text := w.GetWorkload() + " " + conditionText(w.GetCondition())
					switch {
					case w.GetInPlan():
						text += " (this update)"
					case w.GetCurrent() != "":
						text += " (now " + w.GetCurrent() + ")"
					}
					waits = append(waits, text)
				}
				t.Rows = append(t.Rows, []string{a.GetAgent(), strconv.FormatUint(uint64(st.GetWave()), 10), st.GetAction(), st.GetWorkload(), strings.Join(waits, "; ")})
			}
		}
		b.WriteString("\nOrder (a wave waits only for earlier waves):\n")
		b.WriteString(indent(t.Render(width, FitNone, -1)))
	}
	if ws := resp.GetWarnings(); len(ws) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, w := range ws {
			fmt.Fprintf(&b, "  - %s\n", w)
		}
	}
	if hint != "" {
		fmt.Fprintf(&b, "\nTo apply this plan unless the state changes first:\n  %s\n", hint)
	}
	return b.String()
}

// conditionText words a wait condition for people.
func conditionText(c string) string {
	switch c {
	case "ADD_COND_RUNNING":
		return "running"
	case "ADD_COND_SUCCEEDED":
		return "succeeded"
	case "ADD_COND_FAILED":
		return "failed"
	case "DEL_COND_NOT_PENDING_NOR_RUNNING":
		return "neither pending nor running"
	case "DEL_COND_RUNNING":
		return "running"
	case "REMOVED":
		return "old instance removed"
	}
	return c
}

// shortInstance cuts the hash of an instance name to 12 characters.
func shortInstance(s string) string {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) == 3 && len(parts[1]) > 12 {
		return parts[0] + "." + parts[1][:12] + "…" + "." + parts[2]
	}
	return s
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

// PlanTree is a plan as data for YAML and JSON, with the field names of
// the Plan service but for the revision the plan was made at, which the
// service calls seq (a wire name kept for compatibility) and which is no
// history transaction; empty parts are left out.
func PlanTree(resp *grapnelpb.PlanResponse) map[string]any {
	t := map[string]any{"revision": resp.GetSeq(), "accepted": resp.GetAccepted(), "changed": resp.GetChanged()}
	if v := resp.GetApiVersion(); v != "" {
		t["apiVersion"] = v
	}
	if rs := resp.GetRejections(); len(rs) > 0 {
		out := make([]any, 0, len(rs))
		for _, r := range rs {
			out = append(out, map[string]any{"field": r.GetField(), "message": r.GetMessage()})
		}
		t["rejections"] = out
	}
	if ws := resp.GetWorkloads(); len(ws) > 0 {
		out := make([]any, 0, len(ws))
		for _, w := range ws {
			m := map[string]any{"name": w.GetName(), "change": w.GetChange(), "agent": w.GetAgent()}
			putNonEmpty(m, "instance", w.GetInstance())
			putNonEmpty(m, "oldInstance", w.GetOldInstance())
			if w.GetServerRemoves() {
				m["serverRemoves"] = true
			}
			if cs := w.GetCauses(); len(cs) > 0 {
				causes := make([]any, 0, len(cs))
				for _, c := range cs {
					causes = append(causes, c)
				}
				m["causes"] = causes
			}
			if fs := w.GetFields(); len(fs) > 0 {
				fields := make([]any, 0, len(fs))
				for _, f := range fs {
					fields = append(fields, map[string]any{"path": f.GetPath(), "old": f.GetOld(), "new": f.GetNew()})
				}
				m["fields"] = fields
			}
			out = append(out, m)
		}
		t["workloads"] = out
	}
	if cs := resp.GetConfigs(); len(cs) > 0 {
		out := make([]any, 0, len(cs))
		for _, c := range cs {
			out = append(out, map[string]any{"key": c.GetKey(), "change": c.GetChange()})
		}
		t["configs"] = out
	}
	if as := resp.GetAgents(); len(as) > 0 {
		out := make([]any, 0, len(as))
		for _, a := range as {
			steps := make([]any, 0, len(a.GetSteps()))
			for _, st := range a.GetSteps() {
				m := map[string]any{"wave": uint64(st.GetWave()), "action": st.GetAction(), "workload": st.GetWorkload(), "instance": st.GetInstance()}
				if ws := st.GetWaitFor(); len(ws) > 0 {
					waits := make([]any, 0, len(ws))
					for _, w := range ws {
						wm := map[string]any{"workload": w.GetWorkload(), "condition": w.GetCondition(), "inPlan": w.GetInPlan()}
						putNonEmpty(wm, "current", w.GetCurrent())
						waits = append(waits, wm)
					}
					m["waitFor"] = waits
				}
				steps = append(steps, m)
			}
			out = append(out, map[string]any{"agent": a.GetAgent(), "steps": steps})
		}
		t["agents"] = out
	}
	if ws := resp.GetWarnings(); len(ws) > 0 {
		out := make([]any, 0, len(ws))
		for _, w := range ws {
			out = append(out, w)
		}
		t["warnings"] = out
	}
	return t
}

func putNonEmpty(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// planOrder orders the keys of a plan as the Plan service declares them.
func planOrder(path []string) []string {
	switch {
	case len(path) == 0:
		return []string{"revision", "accepted", "changed", "rejections", "apiVersion", "workloads", "configs", "agents", "warnings"}
	case matchPath([]string{"rejections", "*"}, path):
		return []string{"field", "message"}
	case matchPath([]string{"workloads", "*"}, path):
		return []string{"name", "change", "agent", "instance", "oldInstance", "serverRemoves", "causes", "fields"}
	case matchPath([]string{"workloads", "*", "fields", "*"}, path):
		return []string{"path", "old", "new"}
	case matchPath([]string{"configs", "*"}, path):
		return []string{"key", "change"}
	case matchPath([]string{"agents", "*"}, path):
		return []string{"agent", "steps"}
	case matchPath([]string{"agents", "*", "steps", "*"}, path):
		return []string{"wave", "action", "workload", "instance", "waitFor"}
	case matchPath([]string{"agents", "*", "steps", "*", "waitFor", "*"}, path):
		return []string{"workload", "condition", "inPlan", "current"}
	}
	return nil
}
