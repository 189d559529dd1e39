package campaign

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/netns"
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
			a := Plan(Kinds, 7, tc.short, tc.n, DefaultGrace)
			b := Plan(Kinds, 7, tc.short, tc.n, DefaultGrace)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed 7 gave two schedules:\n%v\n%v", a, b)
			}
			if c := Plan(Kinds, 8, tc.short, tc.n, DefaultGrace); reflect.DeepEqual(a, c) {
				t.Fatalf("seeds 7 and 8 gave the same schedule %v", a)
			}
		})
	}
}

func TestShortPlanCoversEveryKindOnce(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		steps := Plan(Kinds, seed, true, 0, DefaultGrace)
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
	steps := Plan(Kinds, 3, false, 5*len(Kinds), DefaultGrace)
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
	for _, s := range Plan(Kinds, 11, false, 20*len(Kinds), grace) {
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

// A short plan puts its upgrade first, so that every other kind runs at
// cluster version 1 (the campaign finalizes right after it); the rest
// stays shuffled by the seed. Without the upgrade kind the plan has none.
func TestShortPlanPutsUpgradeFirst(t *testing.T) {
	seconds := map[Kind]bool{}
	for seed := int64(1); seed <= 20; seed++ {
		steps := Plan(Kinds, seed, true, 0, DefaultGrace)
		if steps[0].Kind != Upgrade {
			t.Fatalf("seed %d: the first step is %s, want the upgrade", seed, steps[0].Kind)
		}
		if LastUpgrade(steps) != 0 {
			t.Fatalf("seed %d: another upgrade at %d", seed, LastUpgrade(steps))
		}
		seconds[steps[1].Kind] = true
		for _, s := range Plan(Without(Kinds, Upgrade), seed, true, 0, DefaultGrace) {
			if s.Kind == Upgrade {
				t.Fatalf("seed %d: an upgrade in a plan without the kind", seed)
			}
		}
	}
	if len(seconds) < 4 {
		t.Fatalf("the step after the upgrade was one of only %v in 20 seeds: the rest is not shuffled", seconds)
	}
	// A long plan keeps the upgrade in its shuffled rounds.
	firsts := 0
	steps := Plan(Kinds, 3, false, 10*len(Kinds), DefaultGrace)
	for i := 0; i < len(steps); i += len(Kinds) {
		if steps[i].Kind == Upgrade {
			firsts++
		}
	}
	if firsts == 10 {
		t.Fatal("every round of a long plan starts with the upgrade")
	}
}

// The replica that starts on the previous release is the one the plan's
// first upgrade picks, drawn from the seed: in a short plan that upgrade
// moves it to this build, and every replica runs this build after it.
func TestPreviousAtStartFromTheSeed(t *testing.T) {
	const replicas = 3
	picked := map[int]bool{}
	for seed := int64(1); seed <= 30; seed++ {
		steps := Plan(Kinds, seed, true, 0, DefaultGrace)
		i := PreviousAtStart(steps, replicas)
		if i < 0 || i >= replicas {
			t.Fatalf("seed %d: replica %d", seed, i)
		}
		if again := PreviousAtStart(Plan(Kinds, seed, true, 0, DefaultGrace), replicas); again != i {
			t.Fatalf("seed %d: replica %d, then %d", seed, i, again)
		}
		picked[i] = true
		previous := map[int]bool{i: true}
		for _, s := range steps {
			if s.Kind == Upgrade {
				target := upgradeTarget(s, replicas)
				previous[target] = !previous[target]
			}
		}
		for r, on := range previous {
			if on {
				t.Fatalf("seed %d: replica %d still on the previous release after the plan's upgrades", seed, r)
			}
		}
	}
	if len(picked) != replicas {
		t.Fatalf("30 seeds started only replicas %v on the previous release", picked)
	}
	if i := PreviousAtStart(Plan(Without(Kinds, Upgrade), 1, true, 0, DefaultGrace), replicas); i != -1 {
		t.Fatalf("a plan without upgrades starts replica %d on the previous release", i)
	}
	// A scripted schedule: the first upgrade's pick.
	steps := []Step{{Kind: LeaderKill, Pick: 1}, {Kind: Upgrade, Pick: 5}, {Kind: Upgrade, Pick: 7}}
	if i := PreviousAtStart(steps, replicas); i != 2 {
		t.Fatalf("scripted: replica %d, want 2 (pick 5)", i)
	}
	if LastUpgrade(steps) != 2 {
		t.Fatalf("scripted: last upgrade %d, want 2", LastUpgrade(steps))
	}
}

// About half the upgrades hand leadership to their target first.
func TestUpgradeLeads(t *testing.T) {
	leads := 0
	for _, s := range Plan(Kinds, 5, false, 40*len(Kinds), DefaultGrace) {
		if s.Kind == Upgrade && upgradeLeads(s, 3) {
			leads++
		}
	}
	if leads < 10 || leads > 30 {
		t.Fatalf("%d of 40 upgrades hand leadership to their target first", leads)
	}
}

// A long campaign swaps releases only in the first rounds, so that it
// finalizes and the rest runs with revocation in effect; the other kinds
// keep every round.
func TestLongPlanConfinesUpgrades(t *testing.T) {
	steps := ConfineUpgrades(Plan(Kinds, 5, false, 20*len(Kinds), DefaultGrace), 10)
	count := map[Kind]int{}
	for i, s := range steps {
		count[s.Kind]++
		if s.Kind == Upgrade && s.Round >= 10 {
			t.Fatalf("step %d: an upgrade in round %d", i, s.Round)
		}
		if i > 0 && s.Round < steps[i-1].Round {
			t.Fatalf("step %d: round %d after round %d", i, s.Round, steps[i-1].Round)
		}
	}
	if count[Upgrade] != 10 {
		t.Errorf("%d upgrades, want one in each of the first 10 rounds", count[Upgrade])
	}
	for _, k := range Without(Kinds, Upgrade) {
		if count[k] != 20 {
			t.Errorf("%s ran %d times in 20 rounds", k, count[k])
		}
	}
	if last := steps[len(steps)-1].Round; last != 19 {
		t.Errorf("last round %d, want 19", last)
	}
}

// A campaign without the flash file system leaves the flash kinds out of
// its plan and says why in the report; a scripted flash fault is refused.
func TestFlashKindsNeedTheFlash(t *testing.T) {
	with := Config{Flash: true, Previous: &Previous{Commit: "c", Server: "s"}}
	if got := with.kinds(); len(got) != len(Kinds) || len(with.skipped()) != 0 {
		t.Fatalf("with flash and a previous release: kinds %v, skipped %v", got, with.skipped())
	}
	without := Config{Previous: &Previous{Commit: "c", Server: "s"}, NoFlash: "--flash=false"}
	for _, k := range without.kinds() {
		if slices.Contains(FlashKinds, k) {
			t.Fatalf("kind %s planned without the flash", k)
		}
	}
	if got := without.kinds(); len(got) != len(Kinds)-len(FlashKinds) {
		t.Fatalf("without flash: %v", got)
	}
	sk := without.skipped()
	if len(sk) != len(FlashKinds) || sk[0] != "power-cut: --flash=false" {
		t.Fatalf("skipped %v", sk)
	}
	without.Steps = []Step{{Kind: LeaderKill}, {Kind: FsyncError}}
	if err := without.checkFlashSteps(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Steps[1]: fsync-error") {
		t.Fatalf("a scripted fsync-error without flash: %v", err)
	}
	with.Steps = without.Steps
	if err := with.checkFlashSteps(); err != nil {
		t.Fatalf("a scripted fsync-error with flash: %v", err)
	}
}

// Storage faults hit the leader on even picks and a follower on odd ones:
// both come up in a long plan, and each is held a few seconds.
func TestStorageFaultParameters(t *testing.T) {
	leader, follower := map[Kind]int{}, map[Kind]int{}
	for _, s := range Plan(Kinds, 9, false, 20*len(Kinds), DefaultGrace) {
		switch s.Kind {
		case DiskFull, ReadOnly, FsyncError:
			if s.Hold < 3*time.Second || s.Hold > 6*time.Second {
				t.Fatalf("%v: hold outside 3–6 s", s)
			}
			if s.Pick%2 == 0 {
				leader[s.Kind]++
			} else {
				follower[s.Kind]++
			}
		case PowerCut:
			if s.Hold < 500*time.Millisecond || s.Hold > 2*time.Second {
				t.Fatalf("%v: power off outside 0.5–2 s", s)
			}
		}
	}
	for _, k := range storageKinds {
		if leader[k] < 3 || follower[k] < 3 {
			t.Fatalf("%s: %d on the leader, %d on a follower in 20 rounds", k, leader[k], follower[k])
		}
	}
}

// A campaign on raft-boltdb passes --raft-log-store bolt to every replica,
// leaves out the upgrade and corrupt-log kinds (WAL only) and says why in
// the report; a scripted one of them is refused, as is an unknown store.
func TestRaftLogStoreBolt(t *testing.T) {
	bolt := Config{Flash: true, RaftLogStore: LogStoreBolt}
	got := bolt.kinds()
	if slices.Contains(got, Upgrade) || slices.Contains(got, CorruptLog) || len(got) != len(Kinds)-2 {
		t.Fatalf("bolt plans %v, want every kind but upgrade and corrupt-log", got)
	}
	sk := bolt.skipped()
	if len(sk) != 2 || !strings.HasPrefix(sk[0], "upgrade: --raft-log-store bolt") || !strings.HasPrefix(sk[1], "corrupt-log: --raft-log-store bolt") {
		t.Fatalf("skipped %v", sk)
	}
	bins := map[string]string{"grapnel-server": "s", "grapnel-agent": "a"}
	scripted := Config{Dir: "d", Bins: bins, Self: "x", RaftLogStore: LogStoreBolt, Steps: []Step{{Kind: LeaderKill}, {Kind: CorruptLog}}}
	if _, err := scripted.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Steps[1]: corrupt-log") {
		t.Fatalf("a scripted corrupt-log on bolt: %v", err)
	}
	scripted.RaftLogStore = "boltdb"
	scripted.Steps = nil
	scripted.Short = true
	if _, err := scripted.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "RaftLogStore") {
		t.Fatalf("an unknown store: %v", err)
	}
	c := &cluster{reps: []*replica{{name: "r1", dataDir: "/d/r1", host: &netns.Host{Name: "h1"}}}, logStore: LogStoreBolt}
	args, err := c.replicaArgs(0)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(args, "--raft-log-store"); i < 0 || args[i+1] != LogStoreBolt {
		t.Fatalf("replica args %v lack --raft-log-store bolt", args)
	}
	c.logStore = ""
	if args, _ := c.replicaArgs(0); slices.Contains(args, "--raft-log-store") {
		t.Fatalf("the default store passed a flag: %v", args)
	}
}
