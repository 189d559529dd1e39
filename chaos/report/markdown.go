package report

import (
	"fmt"
	"maps"
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
	if r.FlashModel != "" {
		fmt.Fprintf(&b, "- flash: every host's data dirs and run folder on a flashfs mount, %s model\n", r.FlashModel)
	}
	fmt.Fprintf(&b, "- availability (1 s buckets with an acknowledged write): %.1f%%\n\n", 100*r.Availability)

	b.WriteString("## Failover figures\n\n")
	figuresTable(&b, r.Figures)
	if len(r.Comparison) > 0 {
		b.WriteString("\n## Comparison (hashicorp/raft default timing)\n\n")
		figuresTable(&b, r.Comparison)
	}

	if len(r.Flash) > 0 {
		b.WriteString("\n## Flash faults\n\n")
		flashTable(&b, r.Flash)
	}
	powerCutTable(&b, r.Start, r.Faults)

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

// flashTable writes one row per flash fault kind, sorted.
func flashTable(b *strings.Builder, figs map[string]FlashFigures) {
	b.WriteString("Detect: from the fault to the StorageFailed problem naming the replica (storage faults), or from " +
		"the damaged replica's start to its log naming the damage (corrupt-log, corrupt-snapshot, flash-replaced). " +
		"Repair: from the heal (power back, the damaged replica's start) to the replica a healthy voter again that " +
		"votes (after a power cut: the cluster settled, every workload running). " +
		"Acked: writes and deletes called from the fault to the repair. Lost: of the last acknowledged write " +
		"of each key before the fault, those a read after it showed gone.\n\n")
	b.WriteString("| fault | n | detect p50 / p99 / max | repair p50 / p99 / max | acked (lowest of one fault) | longest gap p50 / p99 / max | acknowledged writes lost |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, k := range slices.Sorted(maps.Keys(figs)) {
		f := figs[k]
		detect, repair := triple(f.Detect), triple(f.Repair)
		if f.Undetected > 0 {
			detect += fmt.Sprintf(", **%d never**", f.Undetected)
		}
		if f.Unrepaired > 0 {
			repair += fmt.Sprintf(", **%d never**", f.Unrepaired)
		}
		acked := "-"
		if f.Writes > 0 {
			acked = fmt.Sprintf("%.1f%% of %d (%.1f%%)", 100*float64(f.Acked)/float64(f.Writes), f.Writes, 100*f.MinShare)
		}
		lost := fmt.Sprintf("%d of %d", f.Lost, f.Checked)
		if f.Lost > 0 {
			lost = "**" + lost + "**"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s |\n", cell(k), f.N, detect, repair, acked, triple(f.LongestGap), lost)
	}
}

// powerCutTable writes what every flash mount lost in each power cut;
// nothing when there was none.
func powerCutTable(b *strings.Builder, start time.Time, faults []Fault) {
	header := false
	for _, f := range faults {
		for _, m := range f.PowerCut {
			if !header {
				b.WriteString("\n## Power cuts\n\n| at | mount | unsynced bytes dropped | files | namespace operations undone | torn write | problems |\n|---|---|---|---|---|---|---|\n")
				header = true
			}
			torn := m.Torn
			if torn == "" {
				torn = "-"
			}
			problems := "-"
			if len(m.Problems) > 0 {
				problems = "**" + strings.Join(m.Problems, "; ") + "**"
			}
			fmt.Fprintf(b, "| +%v | %s | %d | %d | %d | %s | %s |\n", f.At.Sub(start).Round(time.Millisecond), cell(m.Mount),
				m.BytesDropped, m.FilesDropped, m.OpsUndone, cell(torn), cell(problems))
		}
	}
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
