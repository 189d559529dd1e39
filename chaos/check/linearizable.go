package check

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/grapnel-io/grapnel/chaos/history"
)

// windowChecks bounds the number of checker runs spent shrinking a
// failing history to its smallest window.
const windowChecks = 64

// DefaultInFlight is how long after its call a request whose outcome the
// client never learned may still take effect. It must exceed the longest
// fault of a campaign (8 s) plus the time a server keeps a silent
// connection (6 s of gRPC keepalive) plus an election; see doc.go.
const DefaultInFlight = 30 * time.Second

// entry is one op prepared for porcupine: its times in nanoseconds since
// the first call; after projection, the key it is about and the value it
// wrote or saw there.
type entry struct {
	op         history.Op
	call, ret  int64
	maybe      bool // a write or delete that may not have taken effect
	client     int
	key, value string
}

// Linearizable checks the history against the model of the desired state
// with porcupine, with DefaultInFlight as the bound of unknown outcomes.
func Linearizable(ops []history.Op, dir string, timeout time.Duration) Result {
	return LinearizableWithin(ops, dir, timeout, DefaultInFlight)
}

// LinearizableWithin checks the history key by key, each key's history
// cut into segments that start from a known value (see cut), so the work
// grows with the length of the history instead of its square. An unknown
// delete may take effect up to inFlight after its call, or never. On a
// violation it writes porcupine's visualization of the failing segment to
// dir/linearizability.html and puts the smallest failing window in the
// result; a check that runs out of timeout is not OK either.
func LinearizableWithin(ops []history.Op, dir string, timeout, inFlight time.Duration) Result {
	res := Result{Name: "linearizable"}
	start := time.Now()
	deadline := start.Add(timeout)
	es, dropped := prepare(ops, inFlight)
	if late := tooLate(es, inFlight); late != nil {
		res.Detail = fmt.Sprintf("unknown-outcome write took effect %v after its call, later than the %v the checker assumes: %s",
			time.Duration(late.ret-late.call).Round(time.Millisecond), inFlight, late.op)
		res.Window = []history.Op{late.op}
		return res
	}
	byKey := project(es)
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	segs, checked := 0, 0
	for _, k := range keys {
		for _, sg := range cut(k, byKey[k], minSegment) {
			left := time.Until(deadline)
			if left <= 0 {
				res.Detail = fmt.Sprintf("linearizability check of %d ops timed out after %v: no verdict (%d of %d entries of %d keys checked)",
					len(es), timeout, checked, len(es), len(keys))
				return res
			}
			segs++
			model := regModel(k, sg.init)
			switch porcupine.CheckOperationsTimeout(model, toPorcupine(sg.es), left) {
			case porcupine.Ok:
				checked += len(sg.es)
				continue
			case porcupine.Unknown:
				res.Detail = fmt.Sprintf("linearizability check of %d ops timed out after %v: no verdict (key %s, segment of %d entries)",
					len(es), timeout, k, len(sg.es))
				return res
			}
			return violation(res, sg, len(es), dir, time.Until(deadline))
		}
	}
	res.OK = true
	res.Detail = fmt.Sprintf("%d ops linearizable: %d keys in %d segments (%d unknown-outcome writes never observed and %d failed or unanswered ops left out; %d unknown deletes may have taken effect within %v) in %v",
		len(es), len(keys), segs, dropped.unobserved, dropped.failed, dropped.maybe, inFlight, time.Since(start).Round(time.Millisecond))
	return res
}

// violation reports the failing segment sg: porcupine's visualization and
// its smallest failing window.
func violation(res Result, sg segment, total int, dir string, budget time.Duration) Result {
	model := regModel(sg.key, sg.init)
	ops := toPorcupine(sg.es)
	if dir != "" {
		_, info := porcupine.CheckOperationsVerbose(model, ops, max(budget/2, time.Second))
		path := filepath.Join(dir, "linearizability.html")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			res.Detail = fmt.Sprintf("failed to write visualization: %v; ", err)
		} else if err := porcupine.VisualizePath(model, info, path); err != nil {
			res.Detail = fmt.Sprintf("failed to write visualization: %v; ", err)
		} else {
			res.Artifact = path
		}
	}
	win := smallestWindow(sg.key, sg.es, max(budget/4, time.Second))
	for _, e := range win {
		res.Window = append(res.Window, e.op)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%sNOT linearizable: %d ops; key %s from %s; smallest failing window has %d ops:",
		res.Detail, total, sg.key, sg.init, len(win))
	for _, e := range win {
		b.WriteString("\n  ")
		b.WriteString(e.op.String())
	}
	res.Detail = b.String()
	return res
}

// tooLate returns an unknown-outcome write that was first seen later than
// inFlight after its call: the bound the checker assumes did not hold.
func tooLate(es []entry, inFlight time.Duration) *entry {
	for i := range es {
		e := &es[i]
		if e.op.Kind == history.Write && e.op.Outcome != history.OK && e.ret-e.call > int64(inFlight) {
			return e
		}
	}
	return nil
}

type droppedCounts struct{ unobserved, failed, maybe int }

// prepare turns the recorded ops into checker entries, ordered by call.
//
//   - Fail ops were definitely not applied and reads without an answer
//     say nothing: both are left out.
//   - An Unknown (or unanswered) write whose unique value no read ever
//     saw is left out: it can always be placed after everything else,
//     where nothing observes it, so leaving it out changes no verdict.
//   - An Unknown write that some read saw was applied, before the
//     earliest such read returned: that return becomes its own.
//   - An Unknown delete may take effect at any point up to inFlight after
//     its call, or not at all: it is a maybe entry with that return.
func prepare(ops []history.Op, inFlight time.Duration) ([]entry, droppedCounts) {
	var d droppedCounts
	sorted := append([]history.Op(nil), ops...)
	history.Sort(sorted)
	if len(sorted) == 0 {
		return nil, d
	}
	t0 := sorted[0].Call
	ns := func(t time.Time) int64 { return int64(t.Sub(t0)) }
	// firstSeen: key\x00value → earliest return of an OK read that saw it.
	firstSeen := map[string]int64{}
	for _, op := range sorted {
		if op.Kind != history.Read || op.Outcome != history.OK {
			continue
		}
		for k, v := range op.Read {
			kv := k + "\x00" + v
			if r, ok := firstSeen[kv]; !ok || ns(op.Return) < r {
				firstSeen[kv] = ns(op.Return)
			}
		}
	}
	clients := map[int]int{}
	var es []entry
	for _, op := range sorted {
		e := entry{op: op, call: ns(op.Call), ret: ns(op.Return)}
		maybe := op.Outcome == history.Unknown || op.Outcome == "" || op.Return.IsZero()
		switch {
		case op.Outcome == history.Fail:
			d.failed++
			continue
		case op.Kind == history.Read && maybe:
			d.failed++
			continue
		case op.Kind == history.Write && maybe:
			seen, ok := firstSeen[op.Key+"\x00"+op.Value]
			if !ok {
				d.unobserved++
				continue
			}
			e.ret = max(seen, e.call)
		case op.Kind == history.Delete && maybe:
			e.ret, e.maybe = e.call+int64(inFlight), true
			d.maybe++
		}
		c, ok := clients[op.Client]
		if !ok {
			c = len(clients)
			clients[op.Client] = c
		}
		e.client = c
		es = append(es, e)
	}
	return es, d
}

// toPorcupine converts one key's entries to porcupine operations.
func toPorcupine(es []entry) []porcupine.Operation {
	out := make([]porcupine.Operation, len(es))
	for i, e := range es {
		in := regInput{kind: e.op.Kind, value: e.value, maybe: e.maybe, id: e.op.ID}
		out[i] = porcupine.Operation{ClientId: e.client, Input: in, Call: e.call, Return: e.ret, Metadata: e.op.String()}
	}
	return out
}

// window selects one key's entries of the time window [t0, t1] so that a
// violation inside it is a violation of the whole history, starting from
// an unknown value:
//   - writes and deletes overlapping the window are in; one that began
//     before t0 or ends after t1 becomes maybe-applied inside the window,
//     because it may have taken effect before t0 (then it is part of the
//     unknown start) or after t1;
//   - reads wholly inside the window are in; other reads are left out,
//     which never turns a linearizable history into a failing one.
//
// Ops that ended before t0 are in the unknown start; ops that began after
// t1 can only take effect after every read of the window.
func window(es []entry, t0, t1 int64) []entry {
	var out []entry
	for _, e := range es {
		if e.op.Kind == history.Read {
			if e.call >= t0 && e.ret <= t1 {
				out = append(out, e)
			}
			continue
		}
		if e.call > t1 || e.ret < t0 {
			continue
		}
		if e.call < t0 || e.ret > t1 {
			e.call, e.ret, e.maybe = max(e.call, t0), t1, true
		}
		out = append(out, e)
	}
	return out
}

// smallestWindow shrinks one key's failing history from both ends,
// keeping the shortest run of entries (by call) whose window still fails
// on its own. Each step runs the checker on the window; a step that times
// out does not shrink. The number of checker runs is bounded by
// windowChecks.
func smallestWindow(key string, es []entry, budget time.Duration) []entry {
	if len(es) == 0 {
		return nil
	}
	per := max(budget/windowChecks, 50*time.Millisecond)
	deadline := time.Now().Add(budget)
	runs := 0
	model := regModel(key, regState{any: true})
	// span of entries i..j: from the call of i to the latest return.
	span := func(i, j int) (int64, int64) {
		t1 := es[j].call
		for k := i; k <= j; k++ {
			if !es[k].maybe && es[k].ret > t1 {
				t1 = es[k].ret
			}
		}
		return es[i].call, t1
	}
	fails := func(i, j int) bool {
		if runs >= windowChecks || time.Now().After(deadline) {
			return false
		}
		runs++
		t0, t1 := span(i, j)
		return porcupine.CheckOperationsTimeout(model, toPorcupine(window(es, t0, t1)), per) == porcupine.Illegal
	}
	lo, hi := 0, len(es)-1
	if !fails(lo, hi) {
		return es
	}
	// Largest start that still fails, by bisection, then one by one.
	a, b := lo, hi
	for a < b {
		m := (a + b + 1) / 2
		if fails(m, hi) {
			a = m
		} else {
			b = m - 1
		}
	}
	lo = a
	// Smallest end that still fails.
	a, b = lo, hi
	for a < b {
		m := (a + b) / 2
		if fails(lo, m) {
			b = m
		} else {
			a = m + 1
		}
	}
	hi = a
	for lo < hi && fails(lo+1, hi) {
		lo++
	}
	t0, t1 := span(lo, hi)
	w := window(es, t0, t1)
	// Report the ops as recorded, in call order.
	out := make([]entry, len(w))
	for i, e := range w {
		out[i] = entry{op: e.op, key: e.key, value: e.value}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].op.Call.Before(out[j].op.Call) })
	return out
}
