package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// LeaderObs is what replica Replica said at At: the term it was in and the
// leader it knew for that term ("" when it knew none).
type LeaderObs struct {
	At      time.Time
	Replica string
	Term    uint64
	Leader  string
}

// OneLeaderPerTerm checks Raft's election safety as seen from outside: no
// two observations name different leaders for the same term. Observations
// without a leader or with term 0 say nothing and are skipped.
func OneLeaderPerTerm(obs []LeaderObs) Result {
	res := Result{Name: "one-leader-per-term"}
	// term → leader → replicas that said so (sorted, unique)
	claims := map[uint64]map[string]map[string]bool{}
	for _, o := range obs {
		if o.Term == 0 || o.Leader == "" {
			continue
		}
		if claims[o.Term] == nil {
			claims[o.Term] = map[string]map[string]bool{}
		}
		if claims[o.Term][o.Leader] == nil {
			claims[o.Term][o.Leader] = map[string]bool{}
		}
		claims[o.Term][o.Leader][o.Replica] = true
	}
	var terms []uint64
	for t, leaders := range claims {
		if len(leaders) > 1 {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		res.OK = true
		res.Detail = fmt.Sprintf("%d observations over %d terms: one leader each", len(obs), len(claims))
		return res
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
	var b strings.Builder
	fmt.Fprintf(&b, "%d terms with more than one leader:", len(terms))
	for _, t := range terms {
		fmt.Fprintf(&b, "\n  term %d:", t)
		for _, l := range sortedKeys(claims[t]) {
			fmt.Fprintf(&b, " %s (said by %s);", l, strings.Join(sortedKeys(claims[t][l]), ", "))
		}
	}
	res.Detail = b.String()
	return res
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
