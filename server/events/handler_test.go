package events

import (
	"slices"
	"testing"
)

// swdd~provides-functionality-to-handle-event-subscriptions~1
func TestSubscriptionStore(t *testing.T) {
	all := []string{
		"agent_A@wl_1@1",
		"agent_A@wl_1@2",
		"agent_A@wl_10@1",
		"agent_AB@wl_1@1",
		"agent_B@wl_1@1",
		"cli-conn-1@1",
		"cli-conn-1@2",
		"cli-conn-10@1",
	}
	tests := []struct {
		name string
		op   func(h *Handler)
		want []string
	}{
		{"remove one subscriber", func(h *Handler) { h.Remove("agent_A@wl_1@2") },
			[]string{"agent_A@wl_1@1", "agent_A@wl_10@1", "agent_AB@wl_1@1", "agent_B@wl_1@1", "cli-conn-1@1", "cli-conn-1@2", "cli-conn-10@1"}},
		{"remove unknown subscriber", func(h *Handler) { h.Remove("agent_A@wl_1") }, all},
		{"remove agent", func(h *Handler) { h.RemoveAgent("agent_A") },
			[]string{"agent_AB@wl_1@1", "agent_B@wl_1@1", "cli-conn-1@1", "cli-conn-1@2", "cli-conn-10@1"}},
		{"remove unknown agent", func(h *Handler) { h.RemoveAgent("agent_C") }, all},
		{"remove workload", func(h *Handler) { h.RemoveWorkload("agent_A", "wl_1") },
			[]string{"agent_A@wl_10@1", "agent_AB@wl_1@1", "agent_B@wl_1@1", "cli-conn-1@1", "cli-conn-1@2", "cli-conn-10@1"}},
		{"remove workload on other agent", func(h *Handler) { h.RemoveWorkload("agent_C", "wl_1") }, all},
		{"remove cli connection", func(h *Handler) { h.RemoveConnection("cli-conn-1") },
			[]string{"agent_A@wl_1@1", "agent_A@wl_1@2", "agent_A@wl_10@1", "agent_AB@wl_1@1", "agent_B@wl_1@1", "cli-conn-10@1"}},
		{"re-add replaces", func(h *Handler) { h.Add("cli-conn-1@1", []string{"agents"}) }, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler()
			for _, id := range all {
				h.Add(id, []string{"desiredState"})
			}
			tt.op(h)
			want := slices.Sorted(slices.Values(tt.want))
			if got := h.Subscribers(); !slices.Equal(got, want) {
				t.Errorf("Subscribers() = %v, want %v", got, want)
			}
		})
	}
}

// swdd~provides-functionality-to-handle-event-subscriptions~1
func TestRemoveReportsSubscription(t *testing.T) {
	h := NewHandler()
	h.Add("cli-conn-1@1", nil)
	if !h.Remove("cli-conn-1@1") {
		t.Error("Remove of a subscriber reported false")
	}
	if h.Remove("cli-conn-1@1") {
		t.Error("second Remove reported true")
	}
}

// swdd~provides-functionality-to-handle-event-subscriptions~1
func TestHasSubscribers(t *testing.T) {
	tests := []struct {
		name string
		op   func(h *Handler)
		want bool
	}{
		{"new handler", func(*Handler) {}, false},
		{"subscriber without masks", func(h *Handler) { h.Add("cli-conn-1@1", nil) }, true},
		{"subscriber with masks", func(h *Handler) { h.Add("agent_A@wl@1", []string{"agents", "desiredState"}) }, true},
		{"added and removed", func(h *Handler) { h.Add("cli-conn-1@1", nil); h.Remove("cli-conn-1@1") }, false},
		{"agent removed", func(h *Handler) { h.Add("agent_A@wl@1", nil); h.RemoveAgent("agent_A") }, false},
		{"workload removed", func(h *Handler) { h.Add("agent_A@wl@1", nil); h.RemoveWorkload("agent_A", "wl") }, false},
		{"connection removed", func(h *Handler) { h.Add("cli-conn-1@1", nil); h.RemoveConnection("cli-conn-1") }, false},
		{"other agent removed", func(h *Handler) { h.Add("agent_A@wl@1", nil); h.RemoveAgent("agent_B") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler()
			tt.op(h)
			if got := h.HasSubscribers(); got != tt.want {
				t.Errorf("HasSubscribers() = %v, want %v", got, tt.want)
			}
		})
	}
}

// Subscribing again under the same id replaces the masks.
// swdd~provides-functionality-to-handle-event-subscriptions~1
func TestAddReplacesMasks(t *testing.T) {
	h := NewHandler()
	h.Add("cli-conn-1@1", []string{"desiredState"})
	h.Add("cli-conn-1@1", []string{"agents", "workloadStates"})
	if got := h.subscribers["cli-conn-1@1"]; !slices.Equal(got, []string{"agents", "workloadStates"}) {
		t.Errorf("stored masks = %v, want [agents workloadStates]", got)
	}
	if got := h.Subscribers(); len(got) != 1 {
		t.Errorf("Subscribers() = %v, want one", got)
	}
}

// The store keeps its own copy of the masks: a caller reusing its slice
// must not change the subscription.
func TestAddCopiesMasks(t *testing.T) {
	h := NewHandler()
	masks := []string{"agents"}
	h.Add("cli-conn-1@1", masks)
	masks[0] = "desiredState"
	if got := h.subscribers["cli-conn-1@1"]; !slices.Equal(got, []string{"agents"}) {
		t.Errorf("stored masks = %v, want [agents]", got)
	}
}

// The handler counts each requester's subscriptions for the server's
// caps: a client connection's, a workload's (by agent and workload), a
// re-subscription under the same id counted once, and every way of
// dropping them.
func TestSubscriptionCounts(t *testing.T) {
	h := NewHandler()
	for _, id := range []string{"cli-1@a", "cli-1@b", "cli-1@b", "agent_A@wl_1@x", "agent_A@wl_1@y", "agent_A@wl_2@x", "agent_B@wl_1@x"} {
		h.Add(id, nil)
	}
	check := func(what string, total int, others map[string]int) {
		t.Helper()
		if h.Len() != total {
			t.Errorf("%s: %d subscriptions, want %d", what, h.Len(), total)
		}
		for id, want := range others {
			if got := h.Others(id); got != want {
				t.Errorf("%s: Others(%s) = %d, want %d", what, id, got, want)
			}
		}
	}
	check("added", 6, map[string]int{"cli-1@a": 1, "cli-1@new": 2, "agent_A@wl_1@new": 2, "agent_A@wl_2@x": 0, "agent_B@wl_1@new": 1, "cli-2@new": 0})
	h.Remove("cli-1@a")
	h.Remove("cli-1@a")
	check("removed", 5, map[string]int{"cli-1@new": 1})
	h.RemoveWorkload("agent_A", "wl_1")
	check("workload removed", 3, map[string]int{"agent_A@wl_1@new": 0, "agent_A@wl_2@new": 1})
	h.RemoveAgent("agent_A")
	h.RemoveConnection("cli-1")
	check("agent and connection removed", 1, map[string]int{"agent_A@wl_2@new": 0, "cli-1@new": 0, "agent_B@wl_1@new": 1})
	if len(h.perRequester) != 1 {
		t.Errorf("counts left behind: %v", h.perRequester)
	}
}
