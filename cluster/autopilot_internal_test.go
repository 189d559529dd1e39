package cluster

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestJudge(t *testing.T) {
	ap := Autopilot{LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250}
	tests := []struct {
		name     string
		c        contact
		answered bool
		alive    bool
		healthy  bool
	}{
		{"fresh and current", contact{At: t0.Add(-50 * time.Millisecond), Term: 3, LastLog: 990}, true, true, true},
		{"never answered", contact{}, false, true, false},
		{"dead in gossip", contact{At: t0, Term: 3, LastLog: 1000}, true, false, false},
		{"stale contact", contact{At: t0.Add(-201 * time.Millisecond), Term: 3, LastLog: 1000}, true, true, false},
		{"too far behind", contact{At: t0, Term: 3, LastLog: 749}, true, true, false},
		{"exactly at the limits", contact{At: t0.Add(-200 * time.Millisecond), Term: 3, LastLog: 750}, true, true, true},
		{"other term", contact{At: t0, Term: 2, LastLog: 1000}, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := judge(ap, tt.c, tt.answered, tt.alive, 3, 1000, t0)
			if h.Healthy != tt.healthy {
				t.Fatalf("healthy = %v, want %v (%+v)", h.Healthy, tt.healthy, h)
			}
			if !tt.answered && h.LastContact != -1 {
				t.Fatalf("last contact %v for a member that never answered", h.LastContact)
			}
		})
	}
}

func TestPlanRemovals(t *testing.T) {
	ap := Autopilot{DeadServerTimeout: time.Minute}
	long := t0.Add(-2 * time.Minute)
	recent := t0.Add(-30 * time.Second)
	v := func(id, status string, since time.Time) serverView {
		return serverView{ID: id, Voter: true, Status: status, Since: since}
	}
	nv := func(id, status string, since time.Time) serverView {
		return serverView{ID: id, Status: status, Since: since}
	}
	tests := []struct {
		name       string
		servers    []serverView
		minQuorum  int
		wantRemove []string
		wantHeld   []string
	}{
		{"left goes at once, even below min quorum",
			[]serverView{v("a", StatusAlive, long), v("b", StatusLeft, t0), v("c", StatusAlive, long)}, 3,
			[]string{"b"}, nil},
		{"dead not long enough stays",
			[]serverView{v("a", StatusAlive, long), v("b", StatusDead, recent), v("c", StatusAlive, long)}, 1,
			nil, nil},
		{"dead voter above min quorum goes",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", StatusAlive, long), v("d", StatusDead, long)}, 3,
			[]string{"d"}, nil},
		{"dead voter at min quorum stays",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", StatusDead, long)}, 3,
			nil, []string{"c"}},
		{"missing from gossip counts as dead",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", statusMissing, long)}, 1,
			[]string{"c"}, nil},
		{"dead non-voter goes regardless of quorum",
			[]serverView{v("a", StatusAlive, long), nv("n", StatusDead, long)}, 5,
			[]string{"n"}, nil},
		{"alive voters would lose their majority",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", StatusDead, long), v("d", StatusDead, long), v("e", StatusDead, long)}, 1,
			nil, []string{"c", "d", "e"}},
		{"at most (voters-1)/2 at a time",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", StatusDead, long), v("d", StatusDead, long)}, 1,
			[]string{"c"}, []string{"d"}},
		{"several dead with a clear majority go together",
			[]serverView{v("a", StatusAlive, long), v("b", StatusAlive, long), v("c", StatusAlive, long), v("d", StatusAlive, long),
				v("e", StatusDead, long), v("f", StatusDead, long), v("g", StatusDead, long)}, 1,
			[]string{"e", "f", "g"}, nil},
		{"self is never removed",
			[]serverView{v("a", StatusDead, long), v("b", StatusAlive, long), v("c", StatusAlive, long), v("d", StatusAlive, long)}, 1,
			nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remove, held := planRemovals(tt.servers, "a", ap, tt.minQuorum, t0)
			if got := ids(remove); !slices.Equal(got, tt.wantRemove) {
				t.Fatalf("remove = %v, want %v", got, tt.wantRemove)
			}
			if got := ids(held); !slices.Equal(got, tt.wantHeld) {
				t.Fatalf("held = %v, want %v", got, tt.wantHeld)
			}
		})
	}
}

func ids(rs []removal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func TestPlanPromotions_WaitsForStabilization(t *testing.T) {
	ap := Autopilot{ServerStabilizationTime: 3 * time.Second}
	servers := []serverView{{ID: "a", Voter: true}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	health := map[string]peerHealth{
		"a": {Healthy: true, StableSince: t0.Add(-time.Hour)},
		"b": {Healthy: true, StableSince: t0.Add(-3 * time.Second)},
		"c": {Healthy: true, StableSince: t0.Add(-2 * time.Second)},
		"d": {Healthy: false},
	}
	if got := planPromotions(servers, health, ap, t0); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("promotions = %v, want [b]", got)
	}
}

// Health must hold without interruption: a blip restarts the clock.
func TestHealthView_StableSinceRestartsAfterABlip(t *testing.T) {
	h := newHealthView()
	h.update(map[string]peerHealth{"b": {Healthy: true}}, t0)
	got, _ := h.update(map[string]peerHealth{"b": {Healthy: true}}, t0.Add(time.Second))
	if !got["b"].StableSince.Equal(t0) {
		t.Fatalf("stable since %v, want %v", got["b"].StableSince, t0)
	}
	h.update(map[string]peerHealth{"b": {Healthy: false}}, t0.Add(2*time.Second))
	got, changed := h.update(map[string]peerHealth{"b": {Healthy: true}}, t0.Add(3*time.Second))
	if !changed || !got["b"].StableSince.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after a blip: stable since %v (changed %v)", got["b"].StableSince, changed)
	}
}
