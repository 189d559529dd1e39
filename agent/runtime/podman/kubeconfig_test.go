package podman

import (
	"errors"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

const kubePod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: localhost/grapnel-busybox:latest
    command: ["sleep", "3600"]
`

// indent makes s a YAML block scalar body.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

// Bad fields get an error naming the field and the reason.
func TestKubeCheck(t *testing.T) {
	k := &KubeRuntime{}
	manifest := "manifest: |\n" + indent(kubePod)
	tests := []struct {
		name, config string
		field        string // "" means valid
		reason       string
	}{
		{"manifest only", manifest, "", ""},
		{"all fields", "generalOptions: [--log-level, warn]\nplayOptions: [--start=true]\ndownOptions: []\ncontrolInterfaceTarget: web/app\n" + manifest, "", ""},
		{"several documents", "manifest: |\n" + indent(kubePod+"---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n"), "", ""},
		{"empty", "", "runtimeConfig.manifest", "required"},
		{"manifest missing", "playOptions: [--quiet]", "runtimeConfig.manifest", "required"},
		{"manifest blank", "manifest: ' '", "runtimeConfig.manifest", "required"},
		{"manifest a mapping", "manifest:\n  kind: Pod", "runtimeConfig.manifest", "expected a string"},
		{"manifest not YAML", "manifest: \"kind: [\"", "runtimeConfig.manifest", "not valid YAML"},
		{"manifest not an object", "manifest: \"- a\\n- b\\n\"", "runtimeConfig.manifest", "expected a Kubernetes object"},
		{"manifest without kind", "manifest: \"metadata: {name: x}\"", "runtimeConfig.manifest", "kind is required"},
		{"manifest only comments", "manifest: \"# nothing\\n\"", "runtimeConfig.manifest", "holds no Kubernetes object"},
		{"playOptions not a list", "playOptions: --replace\n" + manifest, "runtimeConfig.playOptions", "expected a list of strings"},
		{"downOptions item a map", "downOptions: [{a: b}]\n" + manifest, "runtimeConfig.downOptions[0]", "expected a string"},
		{"generalOptions null item", "generalOptions: [~]\n" + manifest, "runtimeConfig.generalOptions[0]", "expected a string"},
		{"nested options", "options:\n  playOptions: [--replace]\n" + manifest, "runtimeConfig.options", "top level"},
		{"unknown key", "image: x\n" + manifest, "runtimeConfig.image", "unknown field"},
		{"repeated key", manifest + "manifest: x\n", "runtimeConfig.manifest", "defined more than once"},
		{"target without container", "controlInterfaceTarget: web\n" + manifest, "runtimeConfig.controlInterfaceTarget", "<pod>/<container>"},
		{"target too deep", "controlInterfaceTarget: a/b/c\n" + manifest, "runtimeConfig.controlInterfaceTarget", "<pod>/<container>"},
		{"target a list", "controlInterfaceTarget: [a]\n" + manifest, "runtimeConfig.controlInterfaceTarget", "expected a string"},
		{"not a mapping", "- manifest", "runtimeConfig", "expected a mapping"},
		{"not YAML", "manifest: [", "runtimeConfig", "not valid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k.Check(tt.config)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check accepted it")
			}
			var ce *runtime.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(ce.Reason, tt.reason) {
				t.Fatalf("Check = %v, want field %s with %q", err, tt.field, tt.reason)
			}
			if !errors.Is(err, runtime.ErrBadConfig) {
				t.Fatal("error does not wrap runtime.ErrBadConfig")
			}
		})
	}
}

// Errors never quote the manifest: it may hold secrets.
func TestKubeCheckDoesNotQuoteTheManifest(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, m := range []string{
		"apiVersion: v1\nkind: Secret\nstringData: {password: " + secret + "}\nbroken: [",
		"- " + secret,
		"metadata: {name: " + secret + "}",
	} {
		err := (&KubeRuntime{}).Check("manifest: |\n" + indent(m))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("Check(%q) = %v: want an error without the manifest's values", m, err)
		}
	}
}

func TestKubeParsedFields(t *testing.T) {
	c, err := parseKubeConfig("generalOptions: [--log-level, warn]\nplayOptions: [--start=true, 5]\ndownOptions: [--force]\ncontrolInterfaceTarget: web/app\nmanifest: |\n" + indent(kubePod))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.GeneralOptions, " ") != "--log-level warn" || strings.Join(c.PlayOptions, " ") != "--start=true 5" ||
		strings.Join(c.DownOptions, " ") != "--force" || c.Target != (kubeTarget{"web", "app"}) || c.Manifest != kubePod {
		t.Fatalf("parsed %+v", c)
	}
}

// The config volume keeps what `kube down` needs and nothing of a
// Secret's data or of playOptions.
func TestKubeStoredConfig(t *testing.T) {
	m := kubePod + "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n"
	c, err := parseKubeConfig("playOptions: [--creds, 'u:hunter2']\ndownOptions: [--force]\nmanifest: |\n" + indent(m))
	if err != nil {
		t.Fatal(err)
	}
	s, err := storedConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	text := s.String()
	if strings.Contains(text, "hunter2") || strings.Contains(text, "image") {
		t.Fatalf("stored config keeps more than kube down needs:\n%s", text)
	}
	for _, want := range []string{"kind: Pod", "name: web", "kind: Secret", "name: creds", "kind: Deployment", "name: api", "--force", "apiVersion: apps/v1"} {
		if !strings.Contains(text, want) {
			t.Fatalf("stored config lacks %q:\n%s", want, text)
		}
	}
	// What an agent reads back after a restart.
	back, err := parseKubeConfig(text)
	if err != nil || strings.Join(back.DownOptions, ",") != "--force" {
		t.Fatalf("stored config read back: %+v, %v", back, err)
	}
}

func TestParsePlayedPods(t *testing.T) {
	out := "Volumes:\nhg-vol\nPod:\n9ce2544c3797e5ef\nab12\nContainer:\n7b865ac85c7a\n\n"
	if got := parsePlayedPods(out); strings.Join(got, ",") != "9ce2544c3797e5ef,ab12" {
		t.Fatalf("pods %v", got)
	}
	if got := parsePlayedPods("Container:\nabc\n"); len(got) != 0 {
		t.Fatalf("pods %v from output without a Pod section", got)
	}
}

func TestWithControlInterface(t *testing.T) {
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  template:\n    spec:\n      containers:\n      - name: srv\n        image: x\n        volumeMounts:\n        - {name: data, mountPath: /data}\n"
	tests := []struct {
		name, target, manifest string
		field, reason          string
	}{
		{"pod", "web/app", kubePod, "", ""},
		{"deployment", "api-pod/srv", kubePod + "---\n" + deployment, "", ""},
		{"no target", "", kubePod, "runtimeConfig.controlInterfaceTarget", "required when the workload has control interface access"},
		{"pod not in manifest", "db/app", kubePod, "runtimeConfig.controlInterfaceTarget", "no Pod"},
		{"deployment named without -pod", "api/srv", deployment, "runtimeConfig.controlInterfaceTarget", "no Pod"},
		{"container not in pod", "web/other", kubePod, "runtimeConfig.controlInterfaceTarget", "has no container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := "manifest: |\n" + indent(tt.manifest)
			if tt.target != "" {
				cfg = "controlInterfaceTarget: " + tt.target + "\n" + cfg
			}
			c, err := parseKubeConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			out, err := withControlInterface(c, "/run/grapnel/a_io/w/control_interface")
			if tt.field != "" {
				var ce *runtime.ConfigError
				if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(ce.Reason, tt.reason) {
					t.Fatalf("err = %v, want field %s with %q", err, tt.field, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"mountPath: /run/ankaios/control_interface", "path: /run/grapnel/a_io/w/control_interface", "type: Directory", "name: control-interface-volume"} {
				if !strings.Contains(out, want) {
					t.Fatalf("manifest lacks %q:\n%s", want, out)
				}
			}
			// Still a manifest the parser takes, with what it had.
			if _, err := manifestDocs("m", out); err != nil || (tt.name == "deployment" && !strings.Contains(out, "mountPath: /data")) {
				t.Fatalf("manifest after injection: %v\n%s", err, out)
			}
		})
	}
}

// The parser never panics and every error it returns names a field and
// wraps ErrBadConfig; whatever it accepts has a manifest that the
// config volume can store.
func FuzzParseKubeConfig(f *testing.F) {
	f.Add("manifest: |\n" + indent(kubePod))
	f.Add("generalOptions: [a]\nplayOptions: [b]\ndownOptions: [c]\ncontrolInterfaceTarget: p/c\nmanifest: \"kind: Pod\"")
	f.Add("manifest: &a \"kind: Pod\"\nplayOptions: *a")
	f.Add("manifest: \"---\\n---\\nkind: Pod\\n---\\n\"")
	f.Add("options: {}")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseKubeConfig(text)
		if err != nil {
			var ce *runtime.ConfigError
			if !errors.As(err, &ce) || ce.Field == "" || !errors.Is(err, runtime.ErrBadConfig) {
				t.Fatalf("error %v does not name a field", err)
			}
			return
		}
		if c.Manifest == "" {
			t.Fatal("accepted without a manifest")
		}
		if _, err := storedConfig(c); err != nil {
			t.Fatalf("accepted, but not storable: %v", err)
		}
	})
}
