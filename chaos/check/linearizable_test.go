package check

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

var nextID int64

func w(c int, k, v string, call, ret int, out history.Outcome) history.Op {
	nextID++
	return history.Op{ID: nextID, Client: c, Kind: history.Write, Key: k, Value: v, Call: ms(call), Return: ms(ret), Outcome: out}
}

func del(c int, k string, call, ret int, out history.Outcome) history.Op {
	nextID++
	return history.Op{ID: nextID, Client: c, Kind: history.Delete, Key: k, Call: ms(call), Return: ms(ret), Outcome: out}
}

func r(c int, seen map[string]string, call, ret int) history.Op {
	nextID++
	return history.Op{ID: nextID, Client: c, Kind: history.Read, Read: seen, Call: ms(call), Return: ms(ret), Outcome: history.OK}
}

type kv = map[string]string

func TestLinearizable(t *testing.T) {
	ok, unk, fail := history.OK, history.Unknown, history.Fail
	tests := []struct {
		name string
		ops  []history.Op
		want bool
	}{
		{"empty", nil, true},
		{"sequential", []history.Op{w(0, "a", "1", 0, 10, ok), r(1, kv{"a": "1"}, 20, 30), del(0, "a", 40, 50, ok), r(1, kv{}, 60, 70)}, true},
		{"concurrent write seen either way", []history.Op{w(0, "a", "1", 0, 100, ok), r(1, kv{}, 10, 20), r(1, kv{"a": "1"}, 30, 40), r(2, kv{"a": "1"}, 50, 60)}, true},
		// The classic stale read: after both writes completed, a read sees
		// the newer value and a later read the older one.
		{"stale read after both writes", []history.Op{w(0, "a", "1", 0, 10, ok), w(1, "a", "2", 20, 30, ok), r(2, kv{"a": "2"}, 40, 50), r(3, kv{"a": "1"}, 60, 70)}, false},
		{"read sees value never written", []history.Op{r(0, kv{"a": "x"}, 0, 10)}, false},
		{"read misses acked write", []history.Op{w(0, "a", "1", 0, 10, ok), r(1, kv{}, 20, 30)}, false},
		{"read must match whole map", []history.Op{w(0, "a", "1", 0, 10, ok), w(0, "b", "2", 20, 30, ok), r(1, kv{"a": "1"}, 40, 50)}, false},
		// Atomicity of a multi-key snapshot is not checked (per-key
		// partitioning, see doc.go): each key alone is linearizable here.
		{"reads disagree on order of two keys (per-key only)", []history.Op{w(0, "a", "1", 0, 100, ok), w(1, "b", "1", 0, 100, ok), r(2, kv{"a": "1"}, 10, 90), r(3, kv{"b": "1"}, 10, 90)}, true},
		{"unknown write later observed", []history.Op{w(0, "a", "1", 0, 10, unk), r(1, kv{}, 20, 30), r(1, kv{"a": "1"}, 500, 510)}, true},
		{"unknown write never observed", []history.Op{w(0, "a", "1", 0, 10, unk), r(1, kv{}, 20, 30), r(1, kv{}, 500, 510)}, true},
		{"unknown write observed then gone", []history.Op{w(0, "a", "1", 0, 10, unk), r(1, kv{"a": "1"}, 20, 30), r(1, kv{}, 500, 510)}, false},
		{"failed write never applied", []history.Op{w(0, "a", "1", 0, 10, fail), r(1, kv{}, 20, 30)}, true},
		{"unknown delete later", []history.Op{w(0, "a", "1", 0, 10, ok), del(1, "a", 20, 30, unk), r(2, kv{"a": "1"}, 40, 50), r(2, kv{}, 60, 70)}, true},
		{"unknown delete cannot undo itself", []history.Op{w(0, "a", "1", 0, 10, ok), del(1, "a", 20, 30, unk), r(2, kv{}, 40, 50), r(2, kv{"a": "1"}, 60, 70)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			res := Linearizable(tt.ops, dir, 5*time.Second)
			if res.OK != tt.want {
				t.Fatalf("OK = %v, want %v: %s", res.OK, tt.want, res.Detail)
			}
			if !res.OK {
				if res.Artifact == "" {
					t.Fatalf("no visualization: %s", res.Detail)
				}
				b, err := os.ReadFile(res.Artifact)
				if err != nil || !strings.Contains(string(b), "<html") {
					t.Fatalf("visualization %s unreadable: %v", res.Artifact, err)
				}
				if len(res.Window) == 0 || !strings.Contains(res.Detail, "window") {
					t.Fatalf("no window: %s", res.Detail)
				}
			}
		})
	}
}

// sim generates a linearizable history of n ops by clients: each op takes
// effect at a random point of its interval; reads see the whole map then.
// A share of writes and deletes end Unknown, applied or not at random.
func sim(seed int64, clients, n, keys int) []history.Op {
	rng := rand.New(rand.NewSource(seed))
	type pending struct {
		op      history.Op
		point   time.Time
		applied bool
	}
	free := make([]time.Time, clients)
	var ps []pending
	for i := range n {
		c := i % clients
		call := free[c].Add(time.Duration(rng.Intn(200)) * time.Microsecond)
		ret := call.Add(time.Duration(50+rng.Intn(2000)) * time.Microsecond)
		point := call.Add(time.Duration(rng.Int63n(int64(ret.Sub(call)) + 1)))
		free[c] = ret
		op := history.Op{ID: int64(i + 1), Client: c, Call: t0.Add(call.Sub(time.Time{})), Return: t0.Add(ret.Sub(time.Time{})), Outcome: history.OK}
		key := fmt.Sprintf("wl-%d", rng.Intn(keys))
		applied := true
		switch x := rng.Intn(10); {
		case x < 5:
			op.Kind, op.Key, op.Value = history.Write, key, fmt.Sprintf("v%d", i)
		case x < 6:
			op.Kind, op.Key = history.Delete, key
		default:
			op.Kind = history.Read
		}
		if op.Kind != history.Read && rng.Intn(50) == 0 {
			op.Outcome = history.Unknown
			applied = rng.Intn(2) == 0
		}
		ps = append(ps, pending{op: op, point: t0.Add(point.Sub(time.Time{})), applied: applied})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].point.Before(ps[j].point) })
	m := map[string]string{}
	for i := range ps {
		p := &ps[i]
		switch {
		case p.op.Kind == history.Read:
			p.op.Read = map[string]string{}
			for k, v := range m {
				p.op.Read[k] = v
			}
		case !p.applied:
		case p.op.Kind == history.Write:
			m[p.op.Key] = p.op.Value
		default:
			delete(m, p.op.Key)
		}
	}
	out := make([]history.Op, len(ps))
	for i, p := range ps {
		out[i] = p.op
	}
	return out
}

// TestLinearizableLarge: a long history of 16 clients over 16 keys gets a
// verdict (linearizable). Its speed is BenchmarkLinearizable10k's business;
// under the race detector, which slows the checker about twentyfold, the
// history is shorter.
func TestLinearizableLarge(t *testing.T) {
	n := 10000
	if raceEnabled {
		n = 2000
	}
	res := Linearizable(sim(1, 16, n, 16), t.TempDir(), 2*time.Minute)
	if !res.OK {
		t.Fatalf("simulated linearizable history rejected: %s", res.Detail)
	}
	t.Logf("%s", res.Detail)
}

// BenchmarkLinearizable10k checks 10,000 ops of 16 clients over 16 keys
// (goal: a few seconds per check).
func BenchmarkLinearizable10k(b *testing.B) {
	ops := sim(1, 16, 10000, 16)
	for b.Loop() {
		if res := Linearizable(ops, b.TempDir(), time.Minute); !res.OK {
			b.Fatal(res.Detail)
		}
	}
}

// TestSmallestWindow: a stale read buried in a long linearizable history
// is found, and the window is small and contains it.
func TestSmallestWindow(t *testing.T) {
	ops := sim(2, 8, 2000, 8)
	nextID = int64(len(ops))
	last := ops[len(ops)-1].Return
	// Two writes of a fresh key after everything, then a stale read.
	base := int(last.Sub(t0)/time.Millisecond) + 10
	bad := []history.Op{
		w(0, "x", "old", base, base+1, history.OK),
		w(1, "x", "new", base+2, base+3, history.OK),
		r(2, nil, base+4, base+5),
		r(3, nil, base+6, base+7),
	}
	// Reads of the one key "x" (Op.Key set) compare that key only.
	bad[2].Key, bad[2].Read = "x", kv{"x": "new"}
	bad[3].Key, bad[3].Read = "x", kv{"x": "old"}
	all := append(ops, bad...)
	res := Linearizable(all, t.TempDir(), 20*time.Second)
	if res.OK {
		t.Fatalf("stale read passed: %s", res.Detail)
	}
	if len(res.Window) == 0 || len(res.Window) > 10 {
		t.Fatalf("window of %d ops, want a few:\n%s", len(res.Window), res.Detail)
	}
	ids := map[int64]bool{}
	for _, op := range res.Window {
		ids[op.ID] = true
	}
	if !ids[bad[3].ID] {
		t.Fatalf("window misses the stale read:\n%s", res.Detail)
	}
	t.Logf("%s", res.Detail)
}

func TestLinearizableTimeout(t *testing.T) {
	ops := sim(3, 16, 10000, 16)
	res := Linearizable(ops, t.TempDir(), time.Nanosecond)
	if res.OK || !strings.Contains(res.Detail, "timed out") {
		t.Fatalf("want a timeout verdict, got OK=%v %s", res.OK, res.Detail)
	}
}
