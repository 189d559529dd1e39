package upgrade

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
)

// acked says whether op is an acknowledged write or delete.
func acked(op history.Op) bool {
	return (op.Kind == history.Write || op.Kind == history.Delete) && op.Outcome == history.OK
}

// NextAck is the time from t until the acknowledgement of the first write
// or delete called at or after t, among the ops keep accepts (nil: all);
// false when none was acknowledged.
func NextAck(ops []history.Op, t time.Time, keep func(history.Op) bool) (time.Duration, bool) {
	var first time.Time
	for _, op := range ops {
		if !acked(op) || op.Call.Before(t) || (keep != nil && !keep(op)) {
			continue
		}
		if first.IsZero() || op.Return.Before(first) {
			first = op.Return
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(t), true
}

// LongestGap is the longest stretch of [from, to] in which no write or
// delete was acknowledged (an acknowledgement at its return time).
func LongestGap(ops []history.Op, from, to time.Time) time.Duration {
	var at []time.Time
	for _, op := range ops {
		if acked(op) && !op.Return.Before(from) && !op.Return.After(to) {
			at = append(at, op.Return)
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	gap, last := time.Duration(0), from
	for _, t := range append(at, to) {
		gap = max(gap, t.Sub(last))
		last = t
	}
	return gap
}

// Routes counts the outcomes of the ops called in [from, to) by route
// (via names a client's route, "" leaves it out), routes in the order
// given by order. An op that had not succeeded by to is left out: the
// writers stop at to, which cuts off what they wait for.
func Routes(ops []history.Op, from, to time.Time, via func(client int) string, order []string) []Route {
	by := map[string]*Route{}
	for _, op := range ops {
		if op.Call.Before(from) || !op.Call.Before(to) {
			continue
		}
		if op.Outcome != history.OK && (op.Return.IsZero() || !op.Return.Before(to)) {
			continue
		}
		v := via(op.Client)
		if v == "" {
			continue
		}
		r := by[v]
		if r == nil {
			r = &Route{Via: v}
			by[v] = r
		}
		switch op.Outcome {
		case history.OK:
			r.OK++
		case history.Fail:
			r.Fail++
		default:
			r.Unknown++
		}
		if op.Outcome != history.OK && r.FirstError == "" {
			r.FirstError = op.Err
			if r.FirstError == "" {
				r.FirstError = "no answer"
			}
		}
	}
	var out []Route
	for _, v := range order {
		if r := by[v]; r != nil {
			out = append(out, *r)
			delete(by, v)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[v])
	}
	return out
}

// routeSettle is how long after the cluster is healthy again a client
// may still be reconnecting (its stream broke with the swap or the
// leadership transfer): its requests count from then on.
const routeSettle = time.Second

// refusalMarks are what an error a server chose to answer with says (as
// opposed to a stream that broke or a leader that moved): gRPC status
// codes a refusal comes with, and the Ankaios error answers.
var refusalMarks = []string{"code = PermissionDenied", "code = Unauthenticated", "code = InvalidArgument",
	"code = Unimplemented", "code = FailedPrecondition", "code = ResourceExhausted", "code = Internal",
	"code = Unknown", "permission denied", "Update rejected", "unexpected response"}

// IsRefusal says whether an operation's error is a refusal by the server
// rather than unavailability (a broken stream, a leader that moved, a
// timeout), which a healthy cluster may still show for a moment when an
// election happens.
func IsRefusal(err string) bool {
	for _, m := range refusalMarks {
		if strings.Contains(err, m) {
			return true
		}
	}
	return false
}

// RoutesServe checks that every route in want was served once the
// cluster was healthy again (ops counted from then on): something
// acknowledged, and no request refused. Unavailability (a leader that
// moved, a stream that broke) is tolerated: an election may happen on a
// loaded machine; a refusal is not, nor a route that got nothing done.
func RoutesServe(after []Route, refusals map[string][]string, want []string) Check {
	res := Check{Name: "routes-serve"}
	by := map[string]Route{}
	for _, r := range after {
		by[r.Via] = r
	}
	var bad, notes []string
	for _, v := range want {
		r, ok := by[v]
		switch {
		case !ok || r.OK+r.Fail+r.Unknown == 0:
			bad = append(bad, v+": no request once healthy")
		case len(refusals[v]) > 0:
			bad = append(bad, fmt.Sprintf("%s: %d ok, %d requests refused once healthy; first: %s", v, r.OK, len(refusals[v]), refusals[v][0]))
		case r.OK == 0:
			bad = append(bad, fmt.Sprintf("%s: nothing acknowledged once healthy (%d failed, %d unknown; first error: %s)", v, r.Fail, r.Unknown, r.FirstError))
		case r.Fail+r.Unknown > 0:
			notes = append(notes, fmt.Sprintf("%s %d failed or unknown (unavailable: %s)", v, r.Fail+r.Unknown, r.FirstError))
		}
	}
	if len(bad) > 0 {
		res.Detail = strings.Join(bad, "\n")
		return res
	}
	res.OK = true
	res.Detail = fmt.Sprintf("every route (%s) served once healthy", strings.Join(want, ", "))
	if len(notes) > 0 {
		res.Detail += "; " + strings.Join(notes, "; ")
	}
	return res
}

// Refusals lists, by route, the errors of the ops called in [from, to)
// that are refusals (IsRefusal).
func Refusals(ops []history.Op, from, to time.Time, via func(client int) string) map[string][]string {
	out := map[string][]string{}
	for _, op := range ops {
		if op.Call.Before(from) || !op.Call.Before(to) || op.Outcome == history.OK || !IsRefusal(op.Err) {
			continue
		}
		if v := via(op.Client); v != "" {
			out[v] = append(out[v], op.Err)
		}
	}
	return out
}
