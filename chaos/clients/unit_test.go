package clients

import (
	"errors"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
)

func TestValueRoundTrip(t *testing.T) {
	for _, v := range []string{Value(0, 1), Value(12, 9999), "with: colon", `quote"d`} {
		got, err := ParseValue(RuntimeConfig(v))
		if err != nil || got != v {
			t.Errorf("ParseValue(RuntimeConfig(%q)) = %q, %v", v, got, err)
		}
	}
	if Value(1, 2) == Value(12, 0) || Value(1, 12) == Value(11, 2) {
		t.Error("values of different clients collide")
	}
}

func TestParseValueRejects(t *testing.T) {
	for _, rc := range []string{"", "image: x", "env: {OTHER: 1}", "env: [", "env:\n  CHAOS_VALUE: \"\"\n"} {
		if _, err := ParseValue(rc); !errors.Is(err, ErrNoValue) {
			t.Errorf("ParseValue(%q) = %v, want ErrNoValue", rc, err)
		}
	}
}

func TestAcks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var a Acks
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 1200 * time.Millisecond, 2999 * time.Millisecond} {
		a.Add(t0.Add(d))
	}
	if a.Total() != 5 {
		t.Errorf("Total = %d", a.Total())
	}
	if n := a.Count(t0, t0.Add(100*time.Millisecond)); n != 2 {
		t.Errorf("Count of the first 100 ms = %d, want 2", n)
	}
	got := a.PerSecond(t0, t0.Add(3*time.Second))
	want := []int{3, 1, 1}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("PerSecond = %v, want %v", got, want)
	}
}

// The test helper staleReads must catch what it claims to, or the
// cluster tests prove nothing.
func TestStaleReadsDetects(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w1 := history.Op{ID: 1, Kind: history.Write, Key: "k", Value: "v1", Call: at(0), Return: at(10), Outcome: history.OK}
	w2 := history.Op{ID: 2, Kind: history.Write, Key: "k", Value: "v2", Call: at(20), Return: at(30), Outcome: history.OK}
	read := func(id int64, call, ret int, v string) history.Op {
		return history.Op{ID: id, Kind: history.Read, Read: map[string]string{"k": v}, Call: at(call), Return: at(ret), Outcome: history.OK}
	}
	tests := []struct {
		name string
		r    history.Op
		bad  bool
	}{
		{"current value", read(3, 40, 50, "v2"), false},
		{"concurrent with the overwrite", read(3, 25, 50, "v1"), false},
		{"overwritten before the read", read(3, 40, 50, "v1"), true},
		{"never written", read(3, 40, 50, "v9"), true},
		{"from the future", history.Op{ID: 3, Kind: history.Read, Read: map[string]string{"k": "v2"}, Call: at(12), Return: at(15), Outcome: history.OK}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := staleReads([]history.Op{w1, w2, tt.r})
			if (len(got) > 0) != tt.bad {
				t.Fatalf("staleReads = %v, want bad=%v", got, tt.bad)
			}
		})
	}
}
