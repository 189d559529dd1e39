package campaign

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestPlanSameSeedSameSchedule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		short bool
		n     int
	}{
		{"short", true, 0},
		{"long", false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Plan(7, tc.short, tc.n, DefaultGrace)
			b := Plan(7, tc.short, tc.n, DefaultGrace)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed 7 gave two schedules:\n%v\n%v", a, b)
			}
			if c := Plan(8, tc.short, tc.n, DefaultGrace); reflect.DeepEqual(a, c) {
				t.Fatalf("seeds 7 and 8 gave the same schedule %v", a)
			}
		})
	}
}

func TestShortPlanCoversEveryKindOnce(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		steps := Plan(seed, true, 0, DefaultGrace)
		if len(steps) != len(Kinds) {
			t.Fatalf("seed %d: %d steps, want %d", seed, len(steps), len(Kinds))
		}
		seen := map[Kind]int{}
		for _, s := range steps {
			seen[s.Kind]++
		}
		for _, k := range Kinds {
			if seen[k] != 1 {
				t.Fatalf("seed %d: kind %s %d times, want once", seed, k, seen[k])
			}
		}
	}
}

func TestLongPlanRepeatsEveryKind(t *testing.T) {
	steps := Plan(3, false, 5*len(Kinds), DefaultGrace)
	seen := map[Kind]int{}
	for _, s := range steps {
		seen[s.Kind]++
	}
	for _, k := range Kinds {
		if seen[k] != 5 {
			t.Fatalf("kind %s %d times in 5 rounds, want 5", k, seen[k])
		}
	}
}

func TestPlanParameters(t *testing.T) {
	grace := 3 * time.Second
	for _, s := range Plan(11, false, 20*len(Kinds), grace) {
		switch s.Kind {
		case AgentCutShort:
			if s.Hold >= grace {
				t.Fatalf("%v: a short cut must stay below the grace %v", s, grace)
			}
		case AgentCutLong:
			if s.Hold <= grace {
				t.Fatalf("%v: a long cut must exceed the grace %v", s, grace)
			}
		case PacketLoss:
			if s.Percent < 20 || s.Percent > 30 {
				t.Fatalf("%v: loss outside 20–30 %%", s)
			}
		case Latency:
			if s.Delay <= 0 {
				t.Fatalf("%v: no delay", s)
			}
		}
		if s.Hold <= 0 || s.Gap <= 0 {
			t.Fatalf("%v: hold and gap must be positive", s)
		}
	}
}

func TestParseKinds(t *testing.T) {
	steps, err := ParseKinds([]string{"leader-kill", "latency"}, 1, DefaultGrace)
	if err != nil || len(steps) != 2 || steps[0].Kind != LeaderKill || steps[1].Kind != Latency {
		t.Fatalf("got %v, %v", steps, err)
	}
	if _, err := ParseKinds([]string{"leader-kill", "meteor"}, 1, DefaultGrace); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown kind: got %v, want ErrConfig", err)
	}
}

func TestEveryKindHasAFault(t *testing.T) {
	for _, k := range Kinds {
		if faults[k] == nil {
			t.Fatalf("kind %s has no fault function", k)
		}
	}
}
