package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// nested is a workload whose runtimeConfig loops over c.outer and, for
// each element, over c.inner.
func nested(outer, inner int) (*state.Workload, map[string]any) {
	list := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = fmt.Sprint(i)
		}
		return l
	}
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", Configs: map[string]string{"c": "c"},
		RuntimeConfig: "{{#each c.outer}}{{#each ../c.inner}}x{{/each}}{{/each}}"}
	return w, map[string]any{"c": map[string]any{"outer": list(outer), "inner": list(inner)}}
}

// An #each over n items inside one over m costs at least m×n steps: the
// budget counts the fan-out, not the template's length.
func TestBudgetCountsNestedEachFanOut(t *testing.T) {
	w, configs := nested(20, 30)
	b := NewBudget(0, 0)
	if _, _, err := New().WorkloadWithin("w", w, configs, b); err != nil {
		t.Fatal(err)
	}
	check := b.Steps() - compileCost(w.RuntimeConfig)
	if check < 20*30 || check > 4*20*30 {
		t.Fatalf("checking a 20×30 loop took %d steps, want 600 to 2400", check)
	}

	// The same workload within a budget one step short is refused at its
	// field, naming the budget and its setting; at the exact budget it
	// renders.
	need := b.Steps()
	short := NewBudget(need-1, 0)
	_, _, err := New().WorkloadWithin("w", w, configs, short)
	var fe *state.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, state.ErrBudget) || !errors.Is(err, state.ErrLimit) ||
		fe.Path != "desiredState.workloads.w.runtimeConfig" || !strings.Contains(err.Error(), "max_render_steps_per_request") ||
		!strings.Contains(err.Error(), fmt.Sprint(need-1)) || !short.Spent() {
		t.Fatalf("one step short: %v (spent %v)", err, short.Spent())
	}
	if _, _, err := New().WorkloadWithin("w", w, configs, NewBudget(need, 0)); err != nil {
		t.Fatalf("at the budget: %v", err)
	}
}

// A request pays for parsing each distinct template once, before it is
// parsed, whether the cache holds it or not, so that the outcome never
// depends on the cache; a budget that cannot pay stops before parsing.
func TestBudgetChargesParsingOncePerSource(t *testing.T) {
	w, configs := nested(2, 3)
	cold, warm := NewBudget(0, 0), NewBudget(0, 0)
	r := New()
	if _, _, err := r.WorkloadWithin("a", w, configs, cold); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.WorkloadWithin("a", w, configs, warm); err != nil {
		t.Fatal(err)
	}
	if cold.Steps() != warm.Steps() || cold.Steps() <= compileCost(w.RuntimeConfig) {
		t.Fatalf("cold cache %d steps, warm cache %d, parsing %d", cold.Steps(), warm.Steps(), compileCost(w.RuntimeConfig))
	}
	one := warm.Steps()
	if _, _, err := r.WorkloadWithin("b", w, configs, warm); err != nil {
		t.Fatal(err)
	}
	if second := warm.Steps() - one; second != one-compileCost(w.RuntimeConfig) {
		t.Fatalf("the same template again cost %d steps, want %d (no parsing)", second, one-compileCost(w.RuntimeConfig))
	}

	fresh := New()
	b := NewBudget(compileCost(w.RuntimeConfig)-1, 0)
	if _, _, err := fresh.WorkloadWithin("a", w, configs, b); !errors.Is(err, state.ErrBudget) {
		t.Fatalf("a budget short of parsing: %v", err)
	}
	if fresh.cache.len() != 0 {
		t.Fatal("the template was parsed although the budget could not pay for it")
	}
}

// Parsing costs grow with what raymond's lexer does: text inside tags
// costs more than text between them, each tag a fixed amount, and each
// list index segment a possible pass more. Text without a tag is never
// parsed and costs nothing.
func TestCompileCost(t *testing.T) {
	plain := strings.Repeat("x", 400)
	if compileCost(plain) != 0 {
		t.Fatal("text without a tag costs")
	}
	lexing := func(outside, inside, tags int) int {
		return (outside+2)/3*costOutsidePerThreeBytes + inside*costInsidePerByte + tags*costPerTag
	}
	if got, want := compileCost(plain+"{{c.a}}"), (1+lexingsAfterIndexPasses)*lexing(404, 3, 1); got != want {
		t.Fatalf("one tag: %d, want %d", got, want)
	}
	if got, want := compileCost("{{c.l.0}}{{c.l.1}}"), (3+lexingsAfterIndexPasses)*lexing(8, 10, 2); got != want {
		t.Fatalf("two index segments: %d, want %d", got, want)
	}
	many := strings.Repeat("{{c.l.0}}", 100)
	if got, want := compileCost(many), (1+maxIndexPasses+lexingsAfterIndexPasses)*lexing(400, 500, 100); got != want {
		t.Fatalf("more index segments than passes: %d, want %d", got, want)
	}
}

// The text all templates of a request render counts against the bytes
// budget (max_update_bytes) as it is written, so a workload that would
// cross it stops there.
func TestBudgetBoundsRenderedBytes(t *testing.T) {
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", Configs: map[string]string{"c": "c"},
		RuntimeConfig: "{{#each c.l}}{{this}}{{/each}}"}
	configs := map[string]any{"c": map[string]any{"l": []any{strings.Repeat("a", 600), strings.Repeat("b", 600)}}}
	b := NewBudget(0, 1000)
	if _, _, err := New().WorkloadWithin("w", w, configs, b); !errors.Is(err, state.ErrBudget) ||
		!strings.Contains(err.Error(), "max_update_bytes") || !strings.Contains(err.Error(), "desiredState.workloads.w.runtimeConfig") {
		t.Fatalf("over the bytes budget: %v", err)
	}
	if _, _, err := New().WorkloadWithin("w", w, configs, NewBudget(0, 1200)); err != nil {
		t.Fatalf("at the bytes budget: %v", err)
	}
}

// A name looked up through many enclosing contexts costs a step per
// context: the work of a lookup is counted, not just the mustache.
func TestBudgetCountsLookups(t *testing.T) {
	depth := 40
	src := strings.Repeat("{{#with c.m}}", depth) + "{{#each c.l}}{{c.v}}{{/each}}" + strings.Repeat("{{/with}}", depth)
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", Configs: map[string]string{"c": "c"}, RuntimeConfig: src}
	configs := map[string]any{"c": map[string]any{"m": map[string]any{"k": "v"}, "l": make([]any, 50), "v": "x"}}
	for i := range 50 {
		configs["c"].(map[string]any)["l"].([]any)[i] = "e"
	}
	b := NewBudget(0, 0)
	if _, _, err := New().WorkloadWithin("w", w, configs, b); err != nil {
		t.Fatal(err)
	}
	if check := b.Steps() - compileCost(src); check < 50*depth {
		t.Fatalf("50 lookups through %d contexts cost %d steps", depth, check)
	}
}

// A path may have at most maxPathSegments names: raymond's parser works
// on a long path in time that grows with the square of its length.
func TestPathSegmentsBounded(t *testing.T) {
	ok := "{{c" + strings.Repeat(".a", maxPathSegments-1) + "}}"
	if _, err := compile(ok); err != nil {
		t.Fatalf("%d segments: %v", maxPathSegments, err)
	}
	over := "{{c" + strings.Repeat(".a", maxPathSegments) + "}}"
	if _, err := compile(over); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d segments", maxPathSegments)) {
		t.Fatalf("%d segments: %v", maxPathSegments+1, err)
	}
}
