package check

import (
	"fmt"
	"slices"
	"strings"
)

// IntruderFinding is what one intrusion left: the attempts the replicas
// accepted, and what the cluster showed of it afterwards.
type IntruderFinding struct {
	Attempts int
	// Accepted lists the attempts a replica took ("target channel: what").
	Accepted []string
	// Traces lists what an accepted attempt left in the cluster: the
	// intruder in the Raft configuration, its agent or workload in the
	// state, a replayed update undoing a later one, the operator's lock
	// gone, the victim workload changed.
	Traces []string
	// Controls lists what the campaign checked to know an attempt's
	// refusal means something (the metrics served on the replica's own
	// loopback): a failed one fails the check too.
	Controls []Control
	// Tally counts the attempts by kind.
	Tally []AttemptTally
}

// Control is one check that an attack's target exists.
type Control struct {
	What   string
	OK     bool
	Detail string
}

// AttemptTally is how often one kind of attempt (a channel and what was
// tried) was made, refused, accepted and skipped (the intruder held no
// such key yet), and how often it was made without a refusal owed
// (NotExpected, Why: a removed replica's key whose removal revoked
// nothing), of those how often refused anyway.
type AttemptTally struct {
	Channel            string
	What               string
	Tries              int
	Refused            int
	Accepted           int
	Skipped            int
	NotExpected        int    `json:",omitempty"`
	NotExpectedRefused int    `json:",omitempty"`
	Why                string `json:",omitempty"`
}

// Outcome is how one attempt ended: refused, accepted, not tried
// (Skipped), or tried with no refusal owed (NotExpected says why; it
// counts neither way).
type Outcome struct {
	Accepted    bool
	Skipped     bool
	NotExpected string
}

// Tally adds one attempt of channel and what to the tally.
func Tally(ts []AttemptTally, channel, what string, o Outcome) []AttemptTally {
	i := slices.IndexFunc(ts, func(t AttemptTally) bool { return t.Channel == channel && t.What == what })
	if i < 0 {
		ts = append(ts, AttemptTally{Channel: channel, What: what})
		i = len(ts) - 1
	}
	t := &ts[i]
	t.Tries++
	switch {
	case o.Skipped:
		t.Skipped++
	case o.NotExpected != "":
		t.NotExpected++
		t.Why = o.NotExpected
		if !o.Accepted {
			t.NotExpectedRefused++
		}
	case o.Accepted:
		t.Accepted++
	default:
		t.Refused++
	}
	return ts
}

// MergeTallies sums the tallies of every intrusion, kinds in the order
// first seen.
func MergeTallies(fs []IntruderFinding) []AttemptTally {
	var out []AttemptTally
	for _, f := range fs {
		for _, t := range f.Tally {
			i := slices.IndexFunc(out, func(o AttemptTally) bool { return o.Channel == t.Channel && o.What == t.What })
			if i < 0 {
				out = append(out, AttemptTally{Channel: t.Channel, What: t.What})
				i = len(out) - 1
			}
			out[i].Tries += t.Tries
			out[i].Refused += t.Refused
			out[i].Accepted += t.Accepted
			out[i].Skipped += t.Skipped
			out[i].NotExpected += t.NotExpected
			out[i].NotExpectedRefused += t.NotExpectedRefused
			if t.Why != "" {
				out[i].Why = t.Why
			}
		}
	}
	return out
}

// IntruderRefused passes when every intrusion of the campaign was
// refused on every channel, left nothing behind, and every control held.
func IntruderRefused(fs []IntruderFinding) Result {
	res := Result{Name: "intruder-refused"}
	attempts, skipped, unowed, unowedRefused := 0, 0, 0, 0
	var why []string
	var bad []string
	for i, f := range fs {
		attempts += f.Attempts
		for _, a := range f.Accepted {
			bad = append(bad, fmt.Sprintf("intrusion %d accepted %s", i+1, a))
		}
		for _, t := range f.Traces {
			bad = append(bad, fmt.Sprintf("intrusion %d left %s", i+1, t))
		}
		for _, c := range f.Controls {
			if !c.OK {
				bad = append(bad, fmt.Sprintf("intrusion %d: control failed, %s: %s", i+1, c.What, c.Detail))
			}
		}
		for _, t := range f.Tally {
			skipped += t.Skipped
			unowed += t.NotExpected
			unowedRefused += t.NotExpectedRefused
			if t.Why != "" && !slices.Contains(why, t.Why) {
				why = append(why, t.Why)
			}
		}
	}
	switch {
	case len(fs) == 0:
		res.OK, res.Detail = true, "no intrusion in this campaign (insecure, or not scheduled)"
	case len(bad) > 0:
		res.Detail = strings.Join(bad, "; ")
	case attempts == 0:
		res.Detail = "the intruder made no attempt"
	default:
		res.OK = true
		res.Detail = fmt.Sprintf("%d intrusions, %d attempts, every one refused", len(fs), attempts-skipped-unowed)
		if skipped > 0 {
			res.Detail += fmt.Sprintf(" (%d not tried: no such key yet)", skipped)
		}
		if unowed > 0 {
			res.Detail += fmt.Sprintf("; %d more not expected refused (%s), %d of them refused anyway", unowed, strings.Join(why, "; "), unowedRefused)
		}
		res.Detail += "; the intruder never entered the Raft configuration and left nothing in the state"
	}
	return res
}
