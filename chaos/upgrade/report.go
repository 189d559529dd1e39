package upgrade

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Report is one run: the builds, every step with what it measured and
// what failed, and the phases left out.
type Report struct {
	Mode    string       `json:"mode"`
	Start   time.Time    `json:"start"`
	End     time.Time    `json:"end"`
	Old     BuildInfo    `json:"old"`
	New     BuildInfo    `json:"new"`
	Secure  bool         `json:"secure"`
	Podman  string       `json:"podman"`
	Steps   []StepReport `json:"steps"`
	Skipped []Skip       `json:"skipped,omitempty"`
	// Aborted says why the run stopped before its last step.
	Aborted string `json:"aborted,omitempty"`
}

// BuildInfo describes a build in the report.
type BuildInfo struct {
	Commit        string `json:"commit"`
	SnapshotTypes []int  `json:"snapshotTypes"`
	EntryTypes    []int  `json:"entryTypes"`
}

// Skip is a phase or step left out, and why.
type Skip struct {
	What   string `json:"what"`
	Reason string `json:"reason"`
}

// StepReport is what one step did and found.
type StepReport struct {
	Step  Step          `json:"step"`
	Start time.Time     `json:"start"`
	Took  time.Duration `json:"took"`
	// Releases is what every process ran after the step.
	Releases string `json:"releases"`
	// LeaderBefore and LeaderAfter name the leading replica (and its
	// release) before the action and after the checks.
	LeaderBefore string `json:"leaderBefore,omitempty"`
	LeaderAfter  string `json:"leaderAfter,omitempty"`
	// Stop says how the stopped process ended.
	Stop string `json:"stop,omitempty"`
	// Healthy is from the stop (the start, for Start) until the cluster
	// was healthy again: every replica a healthy voter that caught up,
	// and every agent attached; negative when it never was.
	Healthy time.Duration `json:"healthy"`
	// NextAck is from the stop until the acknowledgement of the first
	// write or delete sent after it; negative when none came.
	NextAck time.Duration `json:"nextAck"`
	// LongestGap is the longest time in the step without an acknowledged
	// write or delete.
	LongestGap time.Duration `json:"longestGap"`
	Routes     []Route       `json:"routes,omitempty"`
	Probes     []Probe       `json:"probes,omitempty"`
	Checks     []Check       `json:"checks,omitempty"`
	Failures   []Failure     `json:"failures,omitempty"`
	Notes      []string      `json:"notes,omitempty"`
	// Skipped, when set, says why the step did not run.
	Skipped string `json:"skipped,omitempty"`
}

// Route is what the writers of one route saw in a step: "leader-aware"
// clients, or "via rN" for Ankaios clients on replica rN.
type Route struct {
	Via        string `json:"via"`
	OK         int    `json:"ok"`
	Fail       int    `json:"fail"`
	Unknown    int    `json:"unknown"`
	FirstError string `json:"firstError,omitempty"`
}

// Probe is one request of a kind the writers do not send.
type Probe struct {
	Kind   string        `json:"kind"`
	Via    string        `json:"via"`
	OK     bool          `json:"ok"`
	Took   time.Duration `json:"took"`
	Detail string        `json:"detail,omitempty"`
}

// Check is one checker's verdict after a step.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Failure is something that went wrong in a step outside the checks and
// probes (a process that would not stop, start or become healthy), with
// the log lines that show it.
type Failure struct {
	What   string   `json:"what"`
	Detail string   `json:"detail"`
	Logs   []string `json:"logs,omitempty"`
}

// Failed says whether anything of the step failed.
func (s *StepReport) Failed() bool {
	if len(s.Failures) > 0 {
		return true
	}
	for _, c := range s.Checks {
		if !c.OK {
			return true
		}
	}
	for _, p := range s.Probes {
		if !p.OK {
			return true
		}
	}
	return false
}

// fail adds a failure.
func (s *StepReport) fail(what, detail string, logs ...string) {
	s.Failures = append(s.Failures, Failure{What: what, Detail: detail, Logs: logs})
}

// note adds a note.
func (s *StepReport) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// Passed says whether every step passed and the run was not aborted.
func (r *Report) Passed() bool {
	if r.Aborted != "" {
		return false
	}
	for i := range r.Steps {
		if r.Steps[i].Failed() {
			return false
		}
	}
	return true
}

// Finding is one incompatibility: the same thing failing the same way,
// with every step it failed in.
type Finding struct {
	What   string `json:"what"`
	Detail string `json:"detail"`
	Steps  []int  `json:"steps"`
	// Example is the first step's full detail and log lines.
	Logs []string `json:"logs,omitempty"`
}

// numbers, addresses and times vary between occurrences of one failure.
var (
	volatileAddr = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}:\d+\b`)
	volatileNum  = regexp.MustCompile(`\d+(\.\d+)?(ms|µs|ns|s|m|h)?`)
)

// signature is what makes two failures the same finding: what failed and
// its detail's first line without the numbers.
func signature(what, detail string) string {
	line, _, _ := strings.Cut(detail, "\n")
	line = volatileAddr.ReplaceAllString(line, "ADDR")
	return what + "\x00" + volatileNum.ReplaceAllString(line, "N")
}

// Findings groups every failure, failed check and failed probe of the run
// by what failed and how, in the order first seen.
func (r *Report) Findings() []Finding {
	var out []Finding
	idx := map[string]int{}
	add := func(step int, what, detail string, logs []string) {
		sig := signature(what, detail)
		i, ok := idx[sig]
		if !ok {
			idx[sig] = len(out)
			out = append(out, Finding{What: what, Detail: detail, Logs: logs})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].Steps, step) {
			out[i].Steps = append(out[i].Steps, step)
		}
	}
	for _, s := range r.Steps {
		for _, f := range s.Failures {
			add(s.Step.N, f.What, f.Detail, f.Logs)
		}
		for _, p := range s.Probes {
			if !p.OK {
				add(s.Step.N, "probe "+p.Kind+" "+p.Via, p.Detail, nil)
			}
		}
		for _, c := range s.Checks {
			if !c.OK {
				add(s.Step.N, "check "+c.Name, c.Detail, nil)
			}
		}
	}
	return out
}

// WriteJSON saves the report.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadReport reads a saved report.
func LoadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// ms prints a duration for the tables: "-" for negative (never).
func ms(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// Markdown is the summary: the builds, one row per step, the
// incompatibilities found, and every failure in full.
func (r *Report) Markdown() string {
	var b strings.Builder
	verdict := "PASSED"
	if !r.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "# Upgrade test (%s): %s\n\n", r.Mode, verdict)
	fmt.Fprintf(&b, "* old: %s\n* new: %s\n", r.Old.Commit, r.New.Commit)
	if d := newOnly(r.Old.SnapshotTypes, r.New.SnapshotTypes); len(d) > 0 {
		fmt.Fprintf(&b, "* snapshot record types only the new build knows: %v\n", d)
	}
	if d := newOnly(r.Old.EntryTypes, r.New.EntryTypes); len(d) > 0 {
		fmt.Fprintf(&b, "* command types only the new build knows: %v\n", d)
	}
	fmt.Fprintf(&b, "* security: %v; podman: %s\n", map[bool]string{true: "mutual TLS", false: "insecure"}[r.Secure], r.Podman)
	fmt.Fprintf(&b, "* took %v (%s to %s)\n", r.End.Sub(r.Start).Round(time.Second), r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339))
	if r.Aborted != "" {
		fmt.Fprintf(&b, "* ABORTED: %s\n", r.Aborted)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "* skipped %s: %s\n", s.What, s.Reason)
	}
	b.WriteString("\n| # | phase | step | after | leader | stop | healthy | next ack | longest gap | result |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Steps {
		result := "ok"
		switch {
		case s.Skipped != "":
			result = "skipped"
		case s.Failed():
			result = fmt.Sprintf("**FAILED** (%d)", countFailures(&s))
		}
		_, what, _ := strings.Cut(s.Step.String(), ": ")
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Step.N, s.Step.Phase, cellText(what),
			cellText(s.Releases), cellText(s.LeaderAfter), cellText(s.Stop), ms(s.Healthy), ms(s.NextAck), ms(s.LongestGap), result)
	}
	if fs := r.Findings(); len(fs) > 0 {
		fmt.Fprintf(&b, "\n## Incompatibilities and failures (%d)\n\n", len(fs))
		for i, f := range fs {
			fmt.Fprintf(&b, "%d. **%s** at steps %s:\n\n", i+1, f.What, joinInts(f.Steps))
			b.WriteString(indent(f.Detail, "       "))
			for _, l := range f.Logs {
				b.WriteString("\n       " + l)
			}
			b.WriteString("\n\n")
		}
	}
	b.WriteString("\n## Steps\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "\n### %s\n\n", s.Step)
		if s.Skipped != "" {
			fmt.Fprintf(&b, "skipped: %s\n", s.Skipped)
			continue
		}
		fmt.Fprintf(&b, "took %v; after: %s; leader before %s, after %s\n\n", s.Took.Round(time.Millisecond), s.Releases, s.LeaderBefore, s.LeaderAfter)
		for _, rt := range s.Routes {
			fmt.Fprintf(&b, "* writers %s: %d ok, %d failed, %d unknown", rt.Via, rt.OK, rt.Fail, rt.Unknown)
			if rt.FirstError != "" {
				fmt.Fprintf(&b, " (first error: %s)", rt.FirstError)
			}
			b.WriteString("\n")
		}
		for _, p := range s.Probes {
			mark := "ok"
			if !p.OK {
				mark = "**FAILED**"
			}
			fmt.Fprintf(&b, "* probe %s %s: %s (%d ms)", p.Kind, p.Via, mark, p.Took.Milliseconds())
			if !p.OK && p.Detail != "" {
				fmt.Fprintf(&b, ": %s", firstLine(p.Detail))
			}
			b.WriteString("\n")
		}
		for _, c := range s.Checks {
			mark := "pass"
			if !c.OK {
				mark = "**FAIL**"
			}
			fmt.Fprintf(&b, "* %s %s: %s\n", mark, c.Name, firstLine(c.Detail))
		}
		for _, f := range s.Failures {
			fmt.Fprintf(&b, "* **FAILURE** %s: %s\n", f.What, firstLine(f.Detail))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "* note: %s\n", n)
		}
	}
	return b.String()
}

func countFailures(s *StepReport) int {
	n := len(s.Failures)
	for _, c := range s.Checks {
		if !c.OK {
			n++
		}
	}
	for _, p := range s.Probes {
		if !p.OK {
			n++
		}
	}
	return n
}

// newOnly lists what b has and a has not.
func newOnly(a, b []int) []int {
	var out []int
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func cellText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}
