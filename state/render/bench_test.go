package render

import (
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// BenchmarkRenderWorkload renders a typical workload with two configs: an
// agent name, a podman runtimeConfig with a loop and an indented file.
func BenchmarkRenderWorkload(b *testing.B) {
	configs := map[string]any{
		"edge_node": map[string]any{"name": "agent_A"},
		"telemetry_cfg": map[string]any{
			"level": "debug",
			"image": "docker.io/library/busybox:1.36",
			"env":   map[string]any{"LEVEL": "debug", "TARGET": "10.0.0.1:4317", "MODE": "push"},
			"conf":  "server: 10.0.0.1\nport: 4317\nretries: 3\n",
		},
	}
	w := &state.Workload{
		Agent:   "{{node.name}}",
		Runtime: "podman",
		RuntimeConfig: "image: {{cfg.image}}\n" +
			"commandOptions: [{{#each cfg.env}}\"-e\", \"{{@key}}={{this}}\"{{#unless @last}}, {{/unless}}{{/each}}]\n" +
			"commandArgs: [\"sh\", \"-c\", \"echo {{cfg.level}}\"]\n",
		Configs: map[string]string{"node": "edge_node", "cfg": "telemetry_cfg"},
		Files: []state.File{{
			MountPoint: "/etc/telemetry/conf.yaml",
			Content:    "telemetry:\n  conf: |\n    {{> indent content=cfg.conf}}\n",
		}},
	}
	r := New()
	if _, _, err := r.Workload("telemetry", w, configs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.Workload("telemetry", w, configs); err != nil {
			b.Fatal(err)
		}
	}
}
