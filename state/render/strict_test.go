package render

import (
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func strictConfigs() map[string]any {
	return map[string]any{
		"c": map[string]any{
			"name":  "n",
			"empty": "",
			"list":  []any{"a", "b", "c"},
			"none":  []any{},
			"map":   map[string]any{"b": "2", "a": "1", "c": "3"},
			"nested": []any{
				map[string]any{"name": "x", "ports": []any{"80", "443"}},
				map[string]any{"name": "y", "ports": []any{"8080"}},
			},
		},
		"s": "plain",
	}
}

var strictMapping = map[string]string{"cfg": "c", "str": "s"}

// swdd~config-renderer-renders-workload-configuration~2: handlebars strict
// mode, so a reference to nothing is an error and not an empty string.
func TestStrictModeRejectsMissingValues(t *testing.T) {
	for _, tc := range []struct{ tmpl, reason string }{
		{"{{cfg.missing}}", "line 1: 'cfg.missing' does not exist"},
		{"{{unknown_alias.x}}", "'unknown_alias.x' does not exist"},
		{"{{unknown_alias}}", "'unknown_alias' does not exist"},
		{"{{cfg.list.7}}", "'cfg.list.7' does not exist"},
		{"{{cfg.list.-1}}", "'cfg.list.-1': list index -1 is negative"},
		{"{{cfg.list.[-1]}}", "'cfg.list.-1': list index -1 is negative"},
		{"{{cfg.name.x}}", "'cfg.name.x' does not exist"},
		{"a\nb\n{{cfg.nested.1.ports.1}}", "line 3: 'cfg.nested.1.ports.1' does not exist"},
		{"{{> indent content=cfg.missing}}", "'cfg.missing' does not exist"},
		{"{{#each cfg.missing}}x{{/each}}", "'cfg.missing' does not exist"},
		{"{{#with cfg.missing}}x{{/with}}", "'cfg.missing' does not exist"},
		{"{{#each cfg.list}}{{this.name}}{{/each}}", "'this.name' does not exist"},
		{"{{#each cfg.list}}{{@key}}{{/each}}", "'@key' does not exist"},
		{"{{@index}}", "'@index' does not exist"},
		{"{{#each cfg.list as |x y|}}{{y}}{{/each}}", "'y' does not exist"},
		{"{{lookup cfg.map 'z'}}", "'cfg.map[z]' does not exist"},
		{"{{lookup cfg.list 3}}", "'cfg.list[3]' does not exist"},
		{"{{#if true}}{{cfg.missing}}{{/if}}", "'cfg.missing' does not exist"},
		{"{{#unless cfg.missing}}{{cfg.missing}}{{/unless}}", "'cfg.missing' does not exist"},
		{"{{#each cfg.list}}{{../../cfg.name}}{{/each}}", "'../../cfg.name' does not exist"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			assertRenderError(t, tc.tmpl, tc.reason)
		})
	}
}

// Templates raymond would mishandle or that use what Ankaios' renderer
// does not offer are refused with a reason.
func TestUnsupportedTemplatesAreRejected(t *testing.T) {
	for _, tc := range []struct{ tmpl, reason string }{
		{"{{cfg}}", "'cfg' is a map, not a single value"},
		{"{{cfg.list}}", "'cfg.list' is a list, not a single value"},
		{"{{> indent content=cfg.list}}", "'cfg.list' is a list, not a single value"},
		{"{{#each str}}x{{/each}}", "#each needs a list or a map, but 'str' is a string"},
		{"{{#with cfg.list}}{{0}}{{/with}}", "a literal cannot be rendered on its own"},
		{"{{#with cfg.list}}{{this.[0]}}{{/with}}", "'this.0' is looked up in a list"},
		{"{{> other}}", "partial 'other' is not supported"},
		{"{{> indent}}", "the indent partial takes exactly one argument"},
		{"{{> indent content=cfg.name other=cfg.name}}", "the indent partial takes exactly one argument"},
		{"{{> indent.x}}", "partial 'indent.x' is not supported"},
		{"{{$ '' content=cfg.name}}", "helper '$' is not supported"},
		{"{{log cfg.name}}", "helper 'log' is not supported"},
		{"{{#equal cfg.name 'n'}}x{{/equal}}", "helper 'equal' cannot be used as a block"},
		{"{{#cfg.list}}x{{/cfg.list}}", "block {{#cfg.list}} is not supported"},
		{"{{if cfg.name}}", "'if' must be used as a block"},
		{"{{#if (lookup cfg.map 'a')}}x{{/if}}", "sub-expressions are not supported"},
		{"{{#if cfg.name includeZero=true}}x{{/if}}", "#if takes exactly one parameter"},
		{"{{cfg.name cfg.name}}", "'cfg.name' is not a helper and takes no parameters"},
		{"{{'text'}}", "a literal cannot be rendered on its own"},
		{"{{@this}}", "'@this' is not a valid @-variable"},
		{"{{{{raw}}}}x{{{{/raw}}}}", "raw blocks are not supported"},
		{"{{#if cfg.name}}", "line 1: syntax error: expected '{{/if}}', found end of template"},
		{"{{#if cfg.name}}{{/each}}", "syntax error: {{/each}} does not close {{#if}}"},
		{"x\n{{/if}}", "line 2: syntax error: unexpected \"{{/\""},
		{"{{cfg.name", "syntax error: Unclosed expression"},
		{"{{cfg/../name}}", "syntax error: invalid path \"cfg/..\""},
		{strings.Repeat("{{#if cfg}}", maxNesting+1) + strings.Repeat("{{/if}}", maxNesting+1), "blocks nest deeper than"},
		{strings.Repeat("{{#each cfg.list}}", 12) + "x" + strings.Repeat("{{/each}}", 12), "steps to render"},
	} {
		name := tc.tmpl
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			assertRenderError(t, tc.tmpl, tc.reason)
		})
	}
}

func assertRenderError(t *testing.T, tmpl, reason string) {
	t.Helper()
	w := &state.Workload{RuntimeConfig: tmpl, Configs: strictMapping}
	got, _, err := New().Workload("wl", w, strictConfigs())
	if err == nil {
		t.Fatalf("rendered %q without error: %q", tmpl, got.RuntimeConfig)
	}
	fe := fieldError(t, err)
	if !strings.Contains(fe.Reason, reason) {
		t.Errorf("reason = %q, want it to contain %q", fe.Reason, reason)
	}
}

// swdd~config-renderer-renders-workload-configuration~2: the blocks that
// handlebars-rust offers, with the contexts they set.
func TestBlocks(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"{{#if cfg.name}}yes{{else}}no{{/if}}", "yes"},
		{"{{#if cfg.empty}}yes{{else}}no{{/if}}", "no"},
		{"{{#if cfg.none}}yes{{else}}no{{/if}}", "no"},
		{"{{#if cfg.missing}}yes{{else}}no{{/if}}", "no"},
		{"{{#if cfg.missing}}yes{{else if cfg.name}}{{cfg.name}}{{/if}}", "n"},
		{"{{#unless cfg.missing}}absent{{/unless}}", "absent"},
		{"{{^if cfg.name}}no{{else}}yes{{/if}}", "yes"},
		{"{{#each cfg.list}}{{@index}}{{this}}{{#unless @last}},{{/unless}}{{/each}}", "0a,1b,2c"},
		{"{{#each cfg.map}}{{@key}}={{this}}{{#if @first}}!{{/if}};{{/each}}", "a=1!;b=2;c=3;"},
		{"{{#each cfg.none}}x{{else}}empty{{/each}}", "empty"},
		{"{{#each cfg.missing}}x{{else}}missing{{/each}}", "missing"},
		{"{{#each cfg.nested}}{{name}}:{{#each ports}}{{../name}}{{this}}{{@../index}}{{/each}};{{/each}}", "x:x800x4430;y:y80801;"},
		{"{{#each cfg.nested as |n|}}{{n.name}}{{cfg.name}}{{/each}}", "xnyn"},
		{"{{#each cfg.list}}{{@root.cfg.name}}{{/each}}", "nnn"},
		{"{{#with cfg.nested.0}}{{name}}-{{ports.1}}-{{../str}}{{/with}}", "x-443-plain"},
		{"{{#with cfg.missing}}x{{else}}none{{/with}}", "none"},
		{"{{#with cfg.name as |v|}}{{v}}{{this}}{{/with}}", "nn"},
		{"{{#each cfg.list}}{{#if @first}}{{this}}{{/if}}{{/each}}", "a"},
		{"{{!-- {{cfg.missing}} --}}{{! also ignored }}ok", "ok"},
		{"\\{{cfg.missing}}", "{{cfg.missing}}"},
		{"  {{#if cfg.name}}\n  in\n  {{/if}}\nout", "  in\nout"},
		{"a {{~cfg.name~}} b", "anb"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			if got := renderRuntimeConfig(t, tc.tmpl, strictMapping, strictConfigs()); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The strict check predicts raymond's output; if the two ever disagreed,
// the check would be vouching for paths raymond resolves differently.
func TestCheckPredictsRaymond(t *testing.T) {
	ctx := map[string]any{"cfg": strictConfigs()["c"], "str": "plain"}
	for _, tmpl := range []string{
		"{{cfg.name}} {{str}} {{this.str}} {{./str}} {{@root.str}}",
		"{{#each cfg.nested}}{{str}}{{name}}{{#each ports}}{{name}}{{this}}{{@index}}{{@../index}}{{/each}}{{/each}}",
		"{{#each cfg.map}}{{@key}}{{this}}{{@first}}{{@last}}{{/each}}",
		"{{#with cfg}}{{#with nested.1}}{{name}}{{../name}}{{../../str}}{{/with}}{{/with}}",
		"{{#if cfg.name}}{{#each cfg.list as |x|}}{{x}}{{#with ../cfg.map as |m|}}{{m.a}}{{x}}{{/with}}{{/each}}{{/if}}",
		"{{#each cfg.list}}{{#if @first}}first{{else if @last}}last{{else}}mid{{/if}}{{/each}}",
		"{{#each cfg.list}}{{lookup ../cfg.list @index}}{{lookup ../cfg.map 'b'}}{{/each}}",
		"k:\n  - |\n    {{> indent content=cfg.nested.0.name}}\n  {{#each cfg.list}}\n  - {{> indent content=this}}\n  {{/each}}\n",
		"{{#unless cfg.none}}{{#each cfg.none}}x{{else}}{{str}}{{/each}}{{/unless}}",
		"{{#each cfg.nested}}{{#with ports}}{{#each this}}{{this}}{{/each}}{{/with}}{{/each}}",
	} {
		t.Run(tmpl, func(t *testing.T) {
			tp, err := compile(tmpl)
			if err != nil {
				t.Fatal(err)
			}
			var predicted strings.Builder
			if err := check(tp, ctx, &predicted, DefaultMaxOutput, nil); err != nil {
				t.Fatal(err)
			}
			got, err := execute(tp, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != predicted.String() {
				t.Errorf("raymond rendered %q, the check predicted %q", got, predicted.String())
			}
		})
	}
}
