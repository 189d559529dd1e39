package check

import (
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/chaos/history"
)

// NoLostAcks checks that every acknowledged write is still in final (the
// desired state read after the faults healed), unless another write or
// delete of the same key that was not refused may have come after it: one
// that had not returned (or never did) before the acknowledged write was
// called. An acknowledged write whose value is gone otherwise was lost.
func NoLostAcks(ops []history.Op, final map[string]string) Result {
	res := Result{Name: "no-lost-acks"}
	byKey := map[string][]history.Op{}
	for _, op := range ops {
		if (op.Kind == history.Write || op.Kind == history.Delete) && op.Outcome != history.Fail {
			byKey[op.Key] = append(byKey[op.Key], op)
		}
	}
	acked := 0
	var lost []history.Op
	for _, w := range ops {
		if w.Kind != history.Write || w.Outcome != history.OK {
			continue
		}
		acked++
		if final[w.Key] == w.Value || replaceable(w, byKey[w.Key]) {
			continue
		}
		lost = append(lost, w)
	}
	if len(lost) == 0 {
		res.OK = true
		res.Detail = fmt.Sprintf("all %d acknowledged writes survive or were replaced later", acked)
		return res
	}
	history.Sort(lost)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d acknowledged writes lost:", len(lost), acked)
	for _, w := range lost {
		got := final[w.Key]
		if got == "" {
			got = "absent"
		}
		fmt.Fprintf(&b, "\n  %s; final %s=%s", w, w.Key, got)
	}
	res.Detail = b.String()
	res.Window = lost
	return res
}

// replaceable says whether some other op of the key may have taken effect
// after w: it is not known to have finished before w began.
func replaceable(w history.Op, sameKey []history.Op) bool {
	for _, o := range sameKey {
		if o.ID == w.ID {
			continue
		}
		finished := o.Outcome == history.OK && !o.Return.IsZero()
		if !finished || !o.Return.Before(w.Call) {
			return true
		}
	}
	return false
}
