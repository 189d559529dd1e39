package campaign

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/chaos/report"
)

// FlashMeasured is what one flash fault took and cost.
type FlashMeasured struct {
	// Detect is from the fault to its StorageFailed problem (storage
	// faults), or from the replica's start to its log naming the damage
	// (data faults); Repair from the heal, the power coming back or the
	// restart, to the target back. The flags say whether each happened.
	Detect, Repair     time.Duration
	Detected, Repaired bool
	// Writes and Acked count the writes and deletes called in the
	// window (from the fault to the repair) and those acknowledged;
	// LongestGap is the longest time in the window without an
	// acknowledgement of one.
	Writes, Acked int
	LongestGap    time.Duration
	// Checked and Lost are LostAcross's figures for the fault.
	Checked int
	Lost    []string
}

// MeasureFlash measures one flash fault from the clients' history: its
// window ends at f.Repaired, or when the target never came back, at
// until (the next fault).
func MeasureFlash(f report.Fault, ops []history.Op, until time.Time) FlashMeasured {
	var m FlashMeasured
	end := until
	if !f.Repaired.IsZero() {
		end = f.Repaired
		m.Repair, m.Repaired = f.Repaired.Sub(f.Healed), true
	}
	if !f.Detected.IsZero() {
		m.Detect, m.Detected = f.Detected.Sub(f.At), true
		if slices.Contains(dataKinds, Kind(f.Kind)) {
			// Damage at rest can be found only once the replica runs.
			m.Detect = f.Detected.Sub(f.Healed)
		}
	}
	m.Writes, m.Acked, m.LongestGap = WriterAvailability(ops, f.At, end)
	after := f.Healed
	if after.IsZero() {
		after = f.At
	}
	m.Checked, m.Lost = LostAcross(ops, f.At, after)
	return m
}

// WriterAvailability counts the writes and deletes called in [from, to]
// and those of them acknowledged, and finds the longest stretch of
// [from, to] in which no write or delete was acknowledged.
func WriterAvailability(ops []history.Op, from, to time.Time) (called, acked int, longestGap time.Duration) {
	var acks []time.Time
	for _, o := range ops {
		if o.Kind == history.Read {
			continue
		}
		if !o.Call.Before(from) && !o.Call.After(to) {
			called++
			if o.Outcome == history.OK {
				acked++
			}
		}
		if o.Outcome == history.OK && !o.Return.Before(from) && !o.Return.After(to) {
			acks = append(acks, o.Return)
		}
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	prev := from
	for _, a := range append(acks, to) {
		longestGap = max(longestGap, a.Sub(prev))
		prev = a
	}
	return called, acked, longestGap
}

// LostAcross checks that a fault at at lost no acknowledged write: for
// every key, the write or delete acknowledged last before at (of those
// that returned before at, the one called last) must still hold in the
// first successful read of the key called at or after after, unless the
// read shows what a later or concurrent write or delete may have left. A
// read shows the write lost when it returns the value of a write that
// was acknowledged before the checked one was called, a value nobody
// wrote, or no value while the checked one wrote one and every delete of
// the key was acknowledged before it was called. Writes and deletes with
// an unknown outcome may take effect at any time, so they excuse a read
// and never convict one. It returns how many keys it checked and what
// each loss was.
func LostAcross(ops []history.Op, at, after time.Time) (checked int, lost []string) {
	byKey := map[string][]history.Op{}
	var reads []history.Op
	for _, o := range ops {
		switch {
		case o.Kind == history.Read && o.Outcome == history.OK && !o.Call.Before(after):
			reads = append(reads, o)
		case o.Kind != history.Read && o.Outcome != history.Fail:
			byKey[o.Key] = append(byKey[o.Key], o)
		}
	}
	history.Sort(reads)
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		list := byKey[key]
		var last *history.Op
		for i, o := range list {
			if o.Outcome == history.OK && o.Return.Before(at) && (last == nil || o.Call.After(last.Call)) {
				last = &list[i]
			}
		}
		if last == nil {
			continue
		}
		i := slices.IndexFunc(reads, func(r history.Op) bool { return r.Key == "" || r.Key == key })
		if i < 0 {
			continue
		}
		checked++
		r := reads[i]
		if why := shownLost(*last, r.Read[key], list); why != "" {
			lost = append(lost, fmt.Sprintf("%s; then %s read %s: %s", last, r.Key, describeValue(r.Read[key]), why))
		}
	}
	return checked, lost
}

// shownLost says why reading v after w (acknowledged) shows w lost, ""
// when a write or delete of list may have left v after w.
func shownLost(w history.Op, v string, list []history.Op) string {
	before := func(o history.Op) bool { return o.Outcome == history.OK && o.Return.Before(w.Call) }
	if v == "" {
		if w.Kind == history.Delete {
			return ""
		}
		for _, o := range list {
			if o.Kind == history.Delete && o.ID != w.ID && !before(o) {
				return ""
			}
		}
		return "absent, and every delete of the key was acknowledged before the write"
	}
	for _, o := range list {
		if o.Kind == history.Write && o.Value == v {
			if o.ID != w.ID && before(o) {
				return fmt.Sprintf("the value of %s, acknowledged before the write was called", o.String())
			}
			return ""
		}
	}
	return "a value nobody wrote"
}

func describeValue(v string) string {
	if v == "" {
		return "absent"
	}
	return v
}

// FlashFigures groups the flash faults' measurements by kind.
func FlashFigures(kinds []Kind, ms []FlashMeasured) map[string]report.FlashFigures {
	type lists struct {
		detect, repair, gap []time.Duration
		f                   report.FlashFigures
		shares              []float64
	}
	by := map[Kind]*lists{}
	for i, m := range ms {
		l := by[kinds[i]]
		if l == nil {
			l = &lists{}
			by[kinds[i]] = l
		}
		l.f.N++
		switch {
		case m.Detected:
			l.detect = append(l.detect, m.Detect)
		case slices.Contains(storageKinds, kinds[i]) || slices.Contains(dataKinds, kinds[i]):
			l.f.Undetected++
		}
		if m.Repaired {
			l.repair = append(l.repair, m.Repair)
		} else {
			l.f.Unrepaired++
		}
		l.gap = append(l.gap, m.LongestGap)
		l.f.Writes += m.Writes
		l.f.Acked += m.Acked
		if m.Writes > 0 {
			l.shares = append(l.shares, float64(m.Acked)/float64(m.Writes))
		}
		l.f.Checked += m.Checked
		l.f.Lost += len(m.Lost)
	}
	out := map[string]report.FlashFigures{}
	for k, l := range by {
		l.f.Detect, l.f.Repair, l.f.LongestGap = report.Measure(l.detect), report.Measure(l.repair), report.Measure(l.gap)
		if len(l.shares) > 0 {
			l.f.MinShare = slices.Min(l.shares)
		}
		out[string(k)] = l.f
	}
	return out
}

// FlashChecked is the check of the flash faults: every storage fault was
// reported (a StorageFailed problem naming its replica) and its replica
// was a healthy voter again by itself after the heal; every power cut
// came back with the cluster settled and every stable workload running,
// and no mount had an undo step it could not do; and no acknowledged
// write checked across a fault was lost (LostAcross). faults and ms are
// the flash faults and their measurements, in the same order.
func FlashChecked(faults []report.Fault, ms []FlashMeasured) check.Result {
	res := check.Result{Name: "flash-faults"}
	var bad []string
	cuts, checked := 0, 0
	for i, f := range faults {
		m := ms[i]
		at := f.Kind + " " + f.Target + " at " + f.At.Format("15:04:05.000")
		isStorage := slices.Contains(storageKinds, Kind(f.Kind))
		isData := slices.Contains(dataKinds, Kind(f.Kind))
		if Kind(f.Kind) == PowerCut {
			cuts++
		}
		switch {
		case isData && !m.Detected:
			bad = append(bad, at+": the replica did not report the damage (its log)")
		case isData && !m.Repaired:
			bad = append(bad, at+": the replica was not a healthy voter that votes again after its restart")
		case isStorage && !m.Detected:
			bad = append(bad, at+": no StorageFailed problem named the replica")
		case isStorage && !m.Repaired:
			bad = append(bad, at+": the replica was not a healthy voter again after the heal")
		case !m.Repaired:
			bad = append(bad, at+": the cluster did not come back with every stable workload running")
		}
		for _, l := range f.PowerCut {
			for _, p := range l.Problems {
				bad = append(bad, at+": "+l.Mount+": "+p)
			}
		}
		for _, l := range m.Lost {
			bad = append(bad, at+": lost "+l)
		}
		checked += m.Checked
	}
	if len(bad) > 0 {
		res.Detail = fmt.Sprintf("%d problems in %d flash faults:\n  %s", len(bad), len(faults), strings.Join(bad, "\n  "))
		return res
	}
	res.OK = true
	data := 0
	for _, f := range faults {
		if slices.Contains(dataKinds, Kind(f.Kind)) {
			data++
		}
	}
	res.Detail = fmt.Sprintf("%d flash faults (%d power cuts, %d storage faults, %d on a stopped replica's data): every storage fault "+
		"reported StorageFailed and its replica a healthy voter again by itself, every damaged replica found the damage and "+
		"voted again, every power cut back with every workload running; %d acknowledged writes read back after the faults, none lost",
		len(faults), cuts, len(faults)-cuts-data, data, checked)
	return res
}

// StableAcrossPowerCuts is the stable-ids check of a campaign with power
// cuts. A power cut replaces every workload (its pid changes, as after a
// reboot), so the pids are compared between power cuts: final compares
// those after the last one (or from the start) with those at the end,
// and idFaults are what changed, or could not be read, before each power
// cut. cuts counts the power cuts after which every workload ran again.
func StableAcrossPowerCuts(final check.Result, idFaults []string, cuts int) check.Result {
	if len(idFaults) > 0 {
		detail := strings.Join(idFaults, "\n  ")
		if !final.OK {
			detail += "\n  at the end: " + final.Detail
		}
		final.OK, final.Detail = false, detail
		return final
	}
	if cuts > 0 && final.OK {
		final.Detail += fmt.Sprintf(", between and after %d power cuts (each replaced every workload, which ran again)", cuts)
	}
	return final
}
