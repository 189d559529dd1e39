package check

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/grapnel-io/grapnel/chaos/history"
)

// verdict checks every key of ops with cuts after at least least entries.
func verdict(t *testing.T, ops []history.Op, least int) (ok bool, segs int) {
	t.Helper()
	es, _ := prepare(ops, DefaultInFlight)
	ok = true
	for k, kes := range project(es) {
		for _, sg := range cut(k, kes, least) {
			segs++
			switch porcupine.CheckOperationsTimeout(regModel(k, sg.init), toPorcupine(sg.es), 10*time.Second) {
			case porcupine.Illegal:
				ok = false
			case porcupine.Unknown:
				t.Fatalf("no verdict for key %s", k)
			}
		}
	}
	return ok, segs
}

// TestCutsKeepTheVerdict: checking a key's history in segments gives the
// verdict of checking it whole, on linearizable histories and on ones with
// one read changed to another value of its key.
func TestCutsKeepTheVerdict(t *testing.T) {
	cuts, bad := 0, 0
	for seed := int64(1); seed <= 150; seed++ {
		ops := sim(seed, 4, 300, 2)
		if seed%3 != 0 {
			perturb(rand.New(rand.NewSource(seed)), ops)
		}
		whole, n := verdict(t, ops, len(ops)+1)
		if n != 2 {
			t.Fatalf("seed %d: %d segments without cuts, want one per key", seed, n)
		}
		parts, m := verdict(t, ops, 1)
		if whole != parts {
			t.Fatalf("seed %d: whole history says %v, %d segments say %v", seed, whole, m, parts)
		}
		cuts += m - n
		if !whole {
			bad++
		}
	}
	if cuts == 0 || bad == 0 {
		t.Fatalf("the test proves nothing: %d cuts, %d failing histories", cuts, bad)
	}
	t.Logf("150 histories, %d failing, %d cuts", bad, cuts)
}

// perturb changes what one read saw of one key to another value the key
// had (or absent).
func perturb(rng *rand.Rand, ops []history.Op) {
	var values []string
	for _, op := range ops {
		if op.Kind == history.Write {
			values = append(values, op.Value)
		}
	}
	for range 100 {
		op := &ops[rng.Intn(len(ops))]
		if op.Kind != history.Read || op.Outcome != history.OK {
			continue
		}
		seen := map[string]string{}
		for k, v := range op.Read {
			seen[k] = v
		}
		k := fmt.Sprintf("wl-%d", rng.Intn(2))
		if rng.Intn(4) == 0 {
			delete(seen, k)
		} else {
			seen[k] = values[rng.Intn(len(values))]
		}
		op.Read = seen
		return
	}
}
