package check

import (
	"slices"

	"github.com/grapnel-io/grapnel/chaos/history"
)

// minSegment is the fewest entries a segment gets before the checker looks
// for a cut: cuts are cheap, but a porcupine run per handful of ops is not.
const minSegment = 512

// segment is a run of one key's entries that is checked on its own,
// starting from a known state.
type segment struct {
	key  string
	init regState
	es   []entry
}

// project splits the prepared entries per key: the writes and deletes of
// a key, and every read projected onto it (a read of all keys sees each
// key, absent when the key is not in its answer). Each key's entries stay
// in call order.
func project(es []entry) map[string][]entry {
	keys := map[string]bool{}
	for _, e := range es {
		if e.op.Kind != history.Read || e.op.Key != "" {
			keys[e.op.Key] = true
			continue
		}
		for k := range e.op.Read {
			keys[k] = true
		}
	}
	out := make(map[string][]entry, len(keys))
	for _, e := range es {
		switch {
		case e.op.Kind != history.Read:
			e.key, e.value = e.op.Key, e.op.Value
			out[e.key] = append(out[e.key], e)
		case e.op.Key != "":
			e.key, e.value = e.op.Key, e.op.Read[e.op.Key]
			out[e.key] = append(out[e.key], e)
		default:
			for k := range keys {
				p := e
				p.key, p.value = k, e.op.Read[k]
				out[k] = append(out[k], p)
			}
		}
	}
	return out
}

// cut cuts one key's history (in call order) into segments whose checks
// together are exactly the check of the whole: a cut at time p is taken
// only where
//   - no write or delete spans p, so each is wholly before or after it;
//   - the write or delete that returned last before p overlaps no other
//     one and is certain (not maybe-applied), so every linearization has
//     the key at its value v at p, and the next segment starts from v;
//   - every read that spans p saw v, so it can be placed at p and is left
//     out of both segments.
//
// Reads that straddle p with another value would have to go to one side
// or the other; such a p is not taken.
func cut(key string, es []entry, least int) []segment {
	var segs []segment
	init := known(absent)
	for len(es) > 0 {
		n, next, v := findCut(es, least)
		if n < 0 {
			segs = append(segs, segment{key: key, init: init, es: es})
			break
		}
		segs = append(segs, segment{key: key, init: init, es: next})
		es, init = es[n:], known(v)
	}
	return segs
}

// findCut finds the first cut after least entries of es. It returns
// the index where the next segment starts, the entries of this segment,
// and the key's value at the cut; n < 0 when es has no cut.
func findCut(es []entry, least int) (n int, seg []entry, v string) {
	mutMax := int64(-1 << 63) // latest return of a write or delete so far
	clean := false            // whether that one overlaps no other and is certain
	var last string           // its value
	var open []int            // reads that may span a point after mutMax
	for j, e := range es {
		if e.op.Kind == history.Read {
			open = append(open, j)
			continue
		}
		open = slices.DeleteFunc(open, func(i int) bool { return es[i].ret <= mutMax })
		if j >= least && clean && e.call > mutMax {
			if p, ok := cutPoint(es, open, mutMax, e.call, last); ok {
				k, seg := split(es, j, p)
				return k, seg, last
			}
		}
		if e.call > mutMax {
			clean, last = !e.maybe, e.value
			if e.op.Kind == history.Delete {
				last = absent
			}
		} else {
			clean = false
		}
		mutMax = max(mutMax, e.ret)
	}
	return -1, nil, ""
}

// cutPoint picks a time p in (lo, hi) that every open read spanning it saw
// v: just after lo, or just after one of the open reads returns.
func cutPoint(es []entry, open []int, lo, hi int64, v string) (int64, bool) {
	cands := []int64{lo + 1}
	for _, i := range open {
		if r := es[i].ret + 1; r > lo && r < hi {
			cands = append(cands, r)
		}
	}
	slices.Sort(cands)
	for _, p := range cands {
		if p >= hi {
			break
		}
		ok := true
		for _, i := range open {
			if es[i].call <= p && es[i].ret >= p && es[i].value != v {
				ok = false
				break
			}
		}
		if ok {
			return p, true
		}
	}
	return 0, false
}

// split ends a segment at p, before es[j] (the next write or delete, which
// calls after p): entries returning before p stay, reads calling after p
// start the next segment, and reads spanning p (all saw the value at p)
// are left out.
func split(es []entry, j int, p int64) (int, []entry) {
	k := j
	for k > 0 && es[k-1].call > p {
		k--
	}
	var seg []entry
	for _, e := range es[:k] {
		if e.ret < p {
			seg = append(seg, e)
		}
	}
	return k, seg
}
