package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// FuzzRender feeds arbitrary template text and config text through the
// renderer. It must never panic, every error must be a *state.FieldError,
// raymond's parser must accept whatever the recogniser accepts (or a
// goroutine would leak), and raymond's output must be what the strict
// check predicted. A workload that renders needs exactly the steps its
// Budget counted: with one fewer it is refused for the budget.
func FuzzRender(f *testing.F) {
	for _, seed := range []struct{ tmpl, cfg string }{
		{"{{cfg}}", "value"},
		{"{{m.list.0}}-{{m.list.1}}", "x"},
		{"{{#each m.list}}{{@index}}={{this}}{{#unless @last}},{{/unless}}{{/each}}", "a\nb"},
		{"{{#each m}}{{@key}}:{{#if this}}y{{else}}n{{/if}}{{/each}}", ""},
		{"key: |\n  {{> indent content=cfg}}\nnext: 1", "l1\nl2\n"},
		{"{{#with m.map}}{{a}}{{../cfg}}{{/with}}", "<&\">"},
		{"{{#each m.list as |x|}}{{x}}{{lookup ../m.list @index}}{{/each}}", "v"},
		{"{{#if cfg}}{{cfg}}{{else if m}}m{{/if}}", ""},
		{"{{cfg.missing}}", "v"},
		{"{{m.list.-1}}{{@root.cfg}}{{this.cfg}}{{./cfg}}", "v"},
		{"{{/if}}{{#each}}{{> x}}{{{{raw}}}}", "v"},
		{"\\{{cfg}} {{!-- {{> indent content=cfg}} --}} {{~cfg~}}", " v "},
		{"{{m.list.0.1}} {{m.list.0.b}} {{m.[list].[1]}}", "v"},
	} {
		f.Add(seed.tmpl, seed.cfg)
	}
	r := New()
	f.Fuzz(func(t *testing.T, tmpl, cfg string) {
		configs := map[string]any{
			"c": cfg,
			"m": map[string]any{"list": []any{cfg, "x"}, "map": map[string]any{"a": cfg}, "s": cfg},
		}
		w := &state.Workload{
			Agent:         tmpl,
			RuntimeConfig: tmpl,
			Configs:       map[string]string{"cfg": "c", "m": "m"},
			Files:         []state.File{{MountPoint: "/f", Content: tmpl}},
		}
		b := NewBudget(0, 0)
		_, _, err := r.WorkloadWithin("wl", w, configs, b)
		if err != nil {
			var fe *state.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, state.ErrInvalid) {
				t.Fatalf("error %v (%T) is not a *state.FieldError", err, err)
			}
		} else if need := b.Steps(); need > 0 {
			if _, _, err := r.WorkloadWithin("wl", w, configs, NewBudget(need, 0)); err != nil {
				t.Fatalf("%q within the %d steps it took: %v", tmpl, need, err)
			}
			if _, _, err := r.WorkloadWithin("wl", w, configs, NewBudget(need-1, 0)); !errors.Is(err, state.ErrBudget) {
				t.Fatalf("%q within one step less than the %d it took: %v", tmpl, need, err)
			}
		}

		tp, err := compile(tmpl)
		var mismatch *parserMismatch
		if errors.As(err, &mismatch) {
			t.Fatalf("recogniser accepted %q but raymond's parser rejected it: %v", tmpl, err)
		}
		if err != nil {
			return
		}
		ctx := map[string]any{"cfg": configs["c"], "m": configs["m"]}
		var predicted strings.Builder
		if check(tp, ctx, &predicted, DefaultMaxOutput, nil) != nil {
			return
		}
		got, err := execute(tp, ctx)
		if err != nil {
			t.Fatalf("raymond failed on a checked template %q: %v", tmpl, err)
		}
		if got != predicted.String() {
			t.Fatalf("template %q: raymond rendered %q, the check predicted %q", tmpl, got, predicted.String())
		}
	})
}
