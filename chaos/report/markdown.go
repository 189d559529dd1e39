package report

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
)

// WriteMarkdown writes a short summary: the run, the figures, the checks
// and the faults.
func (r *Report) WriteMarkdown(path string) error {
	return os.WriteFile(path, []byte(r.Markdown()), 0o644)
}

// Markdown is the summary WriteMarkdown writes.
func (r *Report) Markdown() string {
	var b strings.Builder
	verdict := "PASSED"
	if !r.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "# Chaos run %s\n\n", verdict)
	fmt.Fprintf(&b, "- seed: %d\n", r.Seed)
	fmt.Fprintf(&b, "- from %s to %s (%v)\n", r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339), r.End.Sub(r.Start).Round(time.Second))
	fmt.Fprintf(&b, "- faults: %d\n", len(r.Faults))
	for _, k := range r.Skipped {
		fmt.Fprintf(&b, "- fault kind skipped: %s\n", k)
	}
	fmt.Fprintf(&b, "- availability (1 s buckets with an acknowledged write): %.1f%%\n\n", 100*r.Availability)

	b.WriteString("## Failover figures\n\n")
	figuresTable(&b, r.Figures)
	if len(r.Comparison) > 0 {
		b.WriteString("\n## Comparison (hashicorp/raft default timing)\n\n")
		figuresTable(&b, r.Comparison)
	}

	b.WriteString("\n## Checks\n\n")
	if len(r.Checks) == 0 {
		b.WriteString("No check ran.\n")
	}
	for _, c := range r.Checks {
		mark := "pass"
		if !c.OK {
			mark = "**FAIL**"
		}
		fmt.Fprintf(&b, "- %s %s", mark, cell(c.Name))
		if c.Detail != "" {
			fmt.Fprintf(&b, ": %s", cell(c.Detail))
		}
		if c.Artifact != "" {
			fmt.Fprintf(&b, " (see `%s`)", c.Artifact)
		}
		b.WriteString("\n")
	}

	if len(r.Intrusions) > 0 {
		b.WriteString("\n## Intruder\n\n")
		intrusionTable(&b, r.Intrusions)
	}

	b.WriteString("\n## Faults\n\n")
	if len(r.Faults) == 0 {
		b.WriteString("None.\n")
		return b.String()
	}
	b.WriteString("| at | kind | target | healed after | detail |\n|---|---|---|---|---|\n")
	for _, f := range r.Faults {
		healed := "-"
		if !f.Healed.IsZero() {
			healed = f.Healed.Sub(f.At).Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| +%v | %s | %s | %s | %s |\n", f.At.Sub(r.Start).Round(time.Millisecond),
			cell(f.Kind), cell(f.Target), healed, cell(f.Detail))
	}
	return b.String()
}

// figuresTable writes one row per fault kind, sorted.
func figuresTable(b *strings.Builder, figs map[string]Figures) {
	if len(figs) == 0 {
		b.WriteString("Nothing measured.\n")
		return
	}
	b.WriteString("| fault | n | new leader p50 / p99 / max | next ack p50 / p99 / max | all agents attached p50 / p99 / max |\n")
	b.WriteString("|---|---|---|---|---|\n")
	kinds := make([]string, 0, len(figs))
	for k := range figs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		f := figs[k]
		n := max(f.NewLeader.N, f.NextAck.N, f.AllAttached.N)
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", cell(k), n, triple(f.NewLeader), triple(f.NextAck), triple(f.AllAttached))
	}
}

// intrusionTable writes one row per kind of attempt, in the order the
// intruder made them, with its outcome.
func intrusionTable(b *strings.Builder, ts []check.AttemptTally) {
	b.WriteString("| channel | attempt | tries | outcome |\n|---|---|---|---|\n")
	for _, t := range ts {
		var out []string
		if t.Refused > 0 {
			out = append(out, fmt.Sprintf("%d refused", t.Refused))
		}
		if t.Accepted > 0 {
			out = append(out, fmt.Sprintf("**%d ACCEPTED**", t.Accepted))
		}
		if t.Skipped > 0 {
			out = append(out, fmt.Sprintf("%d not tried (no such key yet)", t.Skipped))
		}
		if t.NotExpected > 0 {
			out = append(out, fmt.Sprintf("%d not expected refused (%s): %d refused anyway", t.NotExpected, t.Why, t.NotExpectedRefused))
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s |\n", cell(t.Channel), cell(t.What), t.Tries, strings.Join(out, ", "))
	}
}

func triple(f Figure) string {
	if f.N == 0 {
		return "-"
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	return fmt.Sprintf("%s / %s / %s (n=%d)", ms(f.P50), ms(f.P99), ms(f.Max), f.N)
}

// cell keeps text on one table row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
