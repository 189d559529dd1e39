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

// entry is one op prepared for porcupine: its times in nanoseconds since
// the first call, with forever meaning "may take effect at any later time".
type entry struct {
	op        history.Op
	call, ret int64
	forever   bool
	client    int
}

// Linearizable checks the history against the model of the desired state
// with porcupine. On a violation it writes porcupine's visualization to
// dir/linearizability.html and puts the smallest failing window in the
// result; a check that runs out of timeout is not OK either.
func Linearizable(ops []history.Op, dir string, timeout time.Duration) Result {
	res := Result{Name: "linearizable"}
	es, dropped := prepare(ops)
	model := kvModel(false)
	start := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(model, toPorcupine(es), timeout)
	took := time.Since(start)
	switch verdict {
	case porcupine.Ok:
		res.OK = true
		res.Detail = fmt.Sprintf("%d ops linearizable (%d unknown-outcome writes never observed and %d failed or unanswered ops left out) in %v",
			len(es), dropped.unobserved, dropped.failed, took.Round(time.Millisecond))
		return res
	case porcupine.Unknown:
		res.Detail = fmt.Sprintf("linearizability check of %d ops timed out after %v: no verdict", len(es), timeout)
		return res
	}
	if dir != "" {
		path := filepath.Join(dir, "linearizability.html")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			res.Detail = fmt.Sprintf("failed to write visualization: %v; ", err)
		} else if err := porcupine.VisualizePath(model, info, path); err != nil {
			res.Detail = fmt.Sprintf("failed to write visualization: %v; ", err)
		} else {
			res.Artifact = path
		}
	}
	budget := timeout - took
	if budget < timeout/4 {
		budget = timeout / 4
	}
	win := smallestWindow(es, budget)
	for _, e := range win {
		res.Window = append(res.Window, e.op)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%sNOT linearizable: %d ops; smallest failing window has %d ops:", res.Detail, len(es), len(win))
	for _, e := range win {
		b.WriteString("\n  ")
		b.WriteString(e.op.String())
	}
	res.Detail = b.String()
	return res
}

type droppedCounts struct{ unobserved, failed int }

// prepare turns the recorded ops into checker entries, ordered by call.
//
//   - Fail ops were definitely not applied and reads without an answer
//     say nothing: both are left out.
//   - An Unknown (or unanswered) write whose unique value no read ever
//     saw is left out: it can always be placed after everything else,
//     where nothing observes it, so leaving it out changes no verdict.
//   - An Unknown write that some read saw must take effect before the
//     earliest such read returns: that return becomes its own.
//   - An Unknown delete may take effect at any time after its call: its
//     return is the end of the history.
func prepare(ops []history.Op) ([]entry, droppedCounts) {
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
	var end int64
	for _, op := range sorted {
		if !op.Return.IsZero() && ns(op.Return) > end {
			end = ns(op.Return)
		}
		if ns(op.Call) > end {
			end = ns(op.Call)
		}
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
			e.ret, e.forever = end+1, true
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

// toPorcupine converts entries to porcupine operations.
func toPorcupine(es []entry) []porcupine.Operation {
	out := make([]porcupine.Operation, len(es))
	for i, e := range es {
		in := kvInput{kind: e.op.Kind, key: e.op.Key, value: e.op.Value, id: e.op.ID}
		var o any
		if e.op.Kind == history.Read {
			o = e.op.Read
		}
		out[i] = porcupine.Operation{ClientId: e.client, Input: in, Call: e.call, Output: o, Return: e.ret, Metadata: e.op.String()}
	}
	return out
}

// window selects the entries of the time window [t0, t1] so that a
// violation inside it is a violation of the whole history, starting from
// an unknown state:
//   - writes and deletes overlapping the window are in; one that began
//     before t0 or ends after t1 may take effect at any time in the window
//     or not at all (it is moved to start at t0 and never end), because it
//     may have taken effect before t0 (then it is part of the unknown
//     start state) or after t1;
//   - reads wholly inside the window are in; other reads are left out,
//     which never turns a linearizable history into a failing one.
//
// Ops that ended before t0 are in the unknown start state; ops that began
// after t1 can only take effect after every read of the window.
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
		if e.call < t0 || e.ret > t1 || e.forever {
			e.call = max(e.call, t0)
			e.ret, e.forever = t1+1, true
		}
		out = append(out, e)
	}
	return out
}

// smallestWindow shrinks a failing history from both ends, keeping the
// shortest run of ops (by call) whose window still fails on its own. Each
// step runs the checker on the window; a step that times out does not
// shrink. The number of checker runs is bounded by windowChecks.
func smallestWindow(es []entry, budget time.Duration) []entry {
	if len(es) == 0 {
		return nil
	}
	per := budget / windowChecks
	if per < 50*time.Millisecond {
		per = 50 * time.Millisecond
	}
	deadline := time.Now().Add(budget)
	runs := 0
	model := kvModel(true)
	// span of ops i..j: from the call of i to the latest finite return.
	span := func(i, j int) (int64, int64) {
		t1 := es[j].call
		for k := i; k <= j; k++ {
			if !es[k].forever && es[k].ret > t1 {
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
		out[i] = entry{op: e.op}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].op.Call.Before(out[j].op.Call) })
	return out
}
