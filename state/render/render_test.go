package render

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// testConfigs mirrors the config map of the Ankaios renderer tests.
func testConfigs() map[string]any {
	return map[string]any{
		"config_1": map[string]any{
			"values": map[string]any{
				"value_1": "value123",
				"value_2": []any{"list_value_1", "list_value_2"},
			},
			"agent_name":  "agent_A",
			"config_file": "some config",
			"binary_file": "YmluYXJ5",
		},
		"config_2": "value_3",
		"multi":    "value_1\nvalue_2\nvalue_3",
	}
}

func testWorkload() *state.Workload {
	return &state.Workload{
		Agent:         "{{ref1.agent_name}}",
		Runtime:       "podman",
		RuntimeConfig: "some_value_1: {{ref1.values.value_1}}\nsome_value_2: {{ref1.values.value_2.0}}",
		RestartPolicy: state.RestartAlways,
		Tags:          map[string]string{"tag": "{{ref1.agent_name}}"},
		Dependencies:  map[string]state.AddCondition{"other": state.AddCondRunning},
		Configs:       map[string]string{"ref1": "config_1", "ref2": "config_2"},
		ControlInterfaceAccess: state.ControlInterfaceAccess{
			AllowRules: []state.AccessRule{{Operation: state.RWRead, FilterMasks: []string{"desiredState"}}},
		},
		Files: []state.File{
			{MountPoint: "/file.json", Content: "{{ref1.config_file}}"},
			{MountPoint: "/binary_file", Content: "{{ref1.binary_file}}", Binary: true},
		},
	}
}

// swdd~config-renderer-renders-workload-configuration~2
// swdd~server-delegate-template-render-to-external-library~1
func TestWorkloadRendersTemplatedFields(t *testing.T) {
	w := testWorkload()
	before := w.Clone()
	got, inst, err := New().Workload("wl", w, testConfigs())
	if err != nil {
		t.Fatal(err)
	}

	want := before.Clone()
	want.Agent = "agent_A"
	want.RuntimeConfig = "some_value_1: value123\nsome_value_2: list_value_1"
	want.Files[0].Content = "some config"
	want.Files[1].Content = "YmluYXJ5"
	want.Configs = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rendered workload\n got %+v\nwant %+v", got, want)
	}
	if wantInst := state.NewInstanceName("wl", "agent_A", want.RuntimeConfig); inst != wantInst {
		t.Errorf("instance name = %v, want %v", inst, wantInst)
	}
	if !reflect.DeepEqual(w, before) {
		t.Errorf("input workload was modified: %+v", w)
	}
	if &got.Files[0] == &w.Files[0] {
		t.Error("rendered workload shares its files with the input")
	}
}

// swdd~config-renderer-renders-workload-configuration~2
func TestWorkloadWithoutConfigsIsNotRendered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string
	}{
		{"nil configs", nil},
		{"empty configs", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &state.Workload{
				Agent:         "{{config_1.agent_name}}",
				RuntimeConfig: "config_1: {{config_1.values.value_1}}",
				Configs:       tc.configs,
				Files:         []state.File{{MountPoint: "/f", Content: "{{x}}"}},
			}
			got, inst, err := New().Workload("wl", w, testConfigs())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, w) || got == w {
				t.Errorf("got %+v, want an unchanged copy of %+v", got, w)
			}
			if want := state.NewInstanceName("wl", w.Agent, w.RuntimeConfig); inst != want {
				t.Errorf("instance name = %v, want %v (from the raw runtimeConfig)", inst, want)
			}
		})
	}
}

// swdd~config-renderer-renders-workload-configuration~2
func TestWorkloadReferencesMissingConfigKey(t *testing.T) {
	for _, tc := range []struct {
		name, runtimeConfig string
		configs             map[string]any
	}{
		{"used alias", "config_1: {{ref1.values.value_1}}", testConfigs()},
		{"unused alias", "some runtime config", testConfigs()},
		{"no configs at all", "config_1: {{ref1.values.value_1}}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &state.Workload{
				RuntimeConfig: tc.runtimeConfig,
				Configs:       map[string]string{"ref1": "not_existing_config_key"},
			}
			_, _, err := New().Workload("wl", w, tc.configs)
			fe := fieldError(t, err)
			if want := "Workload references config key 'not_existing_config_key' that does not exist"; fe.Reason != want {
				t.Errorf("reason = %q, want %q", fe.Reason, want)
			}
			if want := "desiredState.workloads.wl.configs.ref1"; fe.Path != want {
				t.Errorf("path = %q, want %q", fe.Path, want)
			}
		})
	}
}

// swdd~config-renderer-renders-workload-configuration~2
func TestRenderErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(w *state.Workload)
		path   string
		field  string
	}{
		{"agent", func(w *state.Workload) { w.Agent = "{{ref1.not_existing_key}}" },
			"desiredState.workloads.wl.agent", "agent"},
		{"runtimeConfig", func(w *state.Workload) { w.RuntimeConfig = "config_1: {{ref1.values.not_existing_key}}" },
			"desiredState.workloads.wl.runtimeConfig", "runtimeConfig"},
		{"text file", func(w *state.Workload) { w.Files[0].Content = "{{invalid_ref.file_content}}" },
			"desiredState.workloads.wl.files.0.data", "files with mount point /file.json"},
		{"binary file", func(w *state.Workload) { w.Files[1].Content = "{{invalid_ref.binary_data}}" },
			"desiredState.workloads.wl.files.1.binaryData", "files with mount point /binary_file"},
		{"alias is not the config key", func(w *state.Workload) { w.RuntimeConfig = "{{config_1.values.value_1}}" },
			"desiredState.workloads.wl.runtimeConfig", "runtimeConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload()
			tc.mutate(w)
			_, _, err := New().Workload("wl", w, testConfigs())
			fe := fieldError(t, err)
			if fe.Path != tc.path {
				t.Errorf("path = %q, want %q", fe.Path, tc.path)
			}
			prefix := "Failed to render field '" + tc.field + "': '"
			if !strings.HasPrefix(fe.Reason, prefix) || !strings.HasSuffix(fe.Reason, "'") {
				t.Errorf("reason = %q, want it to start with %q", fe.Reason, prefix)
			}
		})
	}
}

// swdd~config-renderer-renders-workload-configuration~2
func TestNoHTMLEscaping(t *testing.T) {
	const special = `value"with"escape'characters'<tag>&amp;`
	configs := map[string]any{"special": special}
	for _, tc := range []struct{ tmpl, want string }{
		{"conf: {{special_conf}}", "conf: " + special},
		{"conf: {{{special_conf}}}", "conf: " + special},
		{"conf: {{&special_conf}}", "conf: " + special},
		{"conf:  {{~special_conf~}} ", "conf:" + special},
		{"conf: {{#with special_conf}}{{this}}{{/with}}", "conf: " + special},
		{"conf: {{lookup this 'special_conf'}}", "conf: " + special},
		{"conf: {{> indent content=special_conf}}", "conf: " + special},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			got := renderRuntimeConfig(t, tc.tmpl, map[string]string{"special_conf": "special"}, configs)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// swdd~config-renderer-renders-workload-configuration~2
func TestListIndex(t *testing.T) {
	configs := map[string]any{"c": map[string]any{
		"values": []any{"zero", "one", map[string]any{"name": "two"}, []any{"a", "b"}},
	}}
	for _, tc := range []struct{ tmpl, want string }{
		{"{{cfg.values.0}}", "zero"},
		{"{{cfg.values.1}}", "one"},
		{"{{cfg.values.[1]}}", "one"},
		{"{{cfg.values/1}}", "one"},
		{"{{cfg.values.2.name}}", "two"},
		{"{{cfg.values.3.1}}", "b"},
		{"{{#with cfg.values.2}}{{name}}{{/with}}", "two"},
		{"{{lookup cfg.values 1}}", "one"},
		{"{{#each cfg.values.3}}{{lookup ../cfg.values @index}};{{/each}}", "zero;one;"},
	} {
		t.Run(tc.tmpl, func(t *testing.T) {
			if got := renderRuntimeConfig(t, tc.tmpl, map[string]string{"cfg": "c"}, configs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// renderRuntimeConfig renders tmpl as the runtimeConfig of a workload with
// the given config mapping and fails the test on error.
func renderRuntimeConfig(t *testing.T, tmpl string, mapping map[string]string, configs map[string]any) string {
	t.Helper()
	got, _, err := New().Workload("wl", &state.Workload{RuntimeConfig: tmpl, Configs: mapping}, configs)
	if err != nil {
		t.Fatalf("rendering %q: %v", tmpl, err)
	}
	return got.RuntimeConfig
}

// fieldError asserts that err is a *state.FieldError wrapping
// state.ErrInvalid and returns it.
func fieldError(t *testing.T, err error) *state.FieldError {
	t.Helper()
	var fe *state.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *state.FieldError", err, err)
	}
	if !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("error %v does not wrap state.ErrInvalid", err)
	}
	return fe
}

func TestReferences(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    *state.Workload
		want []string
	}{
		{"nil workload", nil, nil},
		{"no configs", &state.Workload{}, nil},
		{"sorted, without duplicates", &state.Workload{Configs: map[string]string{"z": "b", "a": "c", "m": "b"}}, []string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := References(tc.w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("References = %v, want %v", got, tc.want)
			}
		})
	}
}
