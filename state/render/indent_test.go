package render

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// swdd~config-renderer-supports-rendering-with-keeping-line-indent~1
// The Ankaios unit test: the multi-line value lands under the tag's
// indentation.
func TestIndentPartialKeepsLineIndent(t *testing.T) {
	tmpl := `
        some:
          keys:
            before:
              config_with_indent: |
                {{> indent content=ref1}}`
	want := `
        some:
          keys:
            before:
              config_with_indent: |
                value_1
                value_2
                value_3`
	got := renderRuntimeConfig(t, tmpl, map[string]string{"ref1": "multi"}, testConfigs())
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// swdd~config-renderer-supports-rendering-with-keeping-line-indent~1
func TestIndentPartialShapes(t *testing.T) {
	configs := map[string]any{"c": map[string]any{
		"one":      "single",
		"multi":    "a\nb",
		"trailing": "a\nb\n",
		"blank":    "a\n\nb",
		"crlf":     "a\r\nb",
		"list":     []any{"a\nb", "single"},
	}}
	for _, tc := range []struct{ name, tmpl, want string }{
		{"single line", "  {{> indent content=cfg.one}}\n", "  single\n"},
		{"tag at column 0", "{{> indent content=cfg.multi}}\nx", "a\nb\nx"},
		{"spaces", "    {{> indent content=cfg.multi}}\nx", "    a\n    b\nx"},
		{"tab", "\t{{> indent content=cfg.multi}}", "\ta\n\tb"},
		{"text before the tag", "  key: {{> indent content=cfg.multi}}", "  key: a\n  b"},
		{"two tags on a line", "  {{> indent content=cfg.multi}} {{> indent content=cfg.multi}}", "  a\n  b a\n  b"},
		{"trailing newline leaves no indented line", "  {{> indent content=cfg.trailing}}\nx", "  a\n  b\n\nx"},
		{"blank line inside the value", "  {{> indent content=cfg.blank}}", "  a\n  \n  b"},
		{"CRLF value", "  {{> indent content=cfg.crlf}}", "  a\r\n  b"},
		{"whitespace control", "  {{~> indent content=cfg.multi ~}}\n  x", "a\n  bx"},
		{"inside each", "l:\n  {{#each cfg.list}}\n  - {{> indent content=this}}\n  {{/each}}\nx", "l:\n  - a\n  b\n  - single\nx"},
		{"string literal", "  {{> indent content=\"p\\nq\"}}", "  p\\nq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renderRuntimeConfig(t, tc.tmpl, map[string]string{"cfg": "c"}, configs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// swdd~config-renderer-supports-rendering-with-keeping-line-indent~1
// Multi-line values inserted at several depths keep the YAML valid and
// come back unchanged when the YAML is parsed.
func TestIndentPartialProducesValidYAML(t *testing.T) {
	script := "#!/bin/sh\necho \"start: {x}\"\n  indented: line\n- not a list item"
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\nspec:\n  containers:\n    - name: c\n      image: busybox\n"
	configs := map[string]any{"c": map[string]any{"script": script, "manifest": manifest}}
	for _, depth := range []int{0, 2, 4, 8, 16} {
		pad := strings.Repeat(" ", depth)
		tmpl := pad + "top:\n" +
			pad + "  script: |\n" +
			pad + "    {{> indent content=cfg.script}}\n" +
			pad + "  manifest: |\n" +
			pad + "    {{> indent content=cfg.manifest}}\n" +
			pad + "  nested:\n" +
			pad + "    - item: |\n" +
			pad + "        {{> indent content=cfg.script}}\n" +
			pad + "  after: end\n"
		t.Run(fmt.Sprintf("depth %d", depth), func(t *testing.T) {
			got := renderRuntimeConfig(t, tmpl, map[string]string{"cfg": "c"}, configs)
			var doc struct {
				Top struct {
					Script   string `yaml:"script"`
					Manifest string `yaml:"manifest"`
					Nested   []struct {
						Item string `yaml:"item"`
					} `yaml:"nested"`
					After string `yaml:"after"`
				} `yaml:"top"`
			}
			if err := yaml.Unmarshal([]byte(got), &doc); err != nil {
				t.Fatalf("rendered YAML does not parse: %v\n%s", err, got)
			}
			if doc.Top.Script != script+"\n" {
				t.Errorf("script = %q, want %q", doc.Top.Script, script+"\n")
			}
			if doc.Top.Manifest != manifest {
				t.Errorf("manifest = %q, want %q", doc.Top.Manifest, manifest)
			}
			if len(doc.Top.Nested) != 1 || doc.Top.Nested[0].Item != script+"\n" {
				t.Errorf("nested = %+v, want one item holding the script", doc.Top.Nested)
			}
			if doc.Top.After != "end" {
				t.Errorf("after = %q, want %q", doc.Top.After, "end")
			}
			var inner map[string]any
			if err := yaml.Unmarshal([]byte(doc.Top.Manifest), &inner); err != nil || inner["kind"] != "Pod" {
				t.Errorf("embedded manifest does not survive: %v %v", inner, err)
			}
		})
	}
}
