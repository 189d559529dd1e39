package podman

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/yamlnode"
)

// kubeConfig is a parsed podman-kube runtimeConfig, with the Ankaios
// field names: generalOptions go before `kube play`, playOptions after
// it, downOptions after `kube down`; manifest is the Kubernetes YAML fed
// to both on standard input; controlInterfaceTarget names the
// <pod>/<container> that gets the control interface.
type kubeConfig struct {
	GeneralOptions []string
	PlayOptions    []string
	DownOptions    []string
	Manifest       string
	// Target is controlInterfaceTarget split; zero when not set.
	Target kubeTarget
}

// kubeTarget is the container that gets the control interface.
type kubeTarget struct {
	Pod, Container string
}

const kubeFields = "generalOptions, playOptions, downOptions, controlInterfaceTarget or manifest"

// parseKubeConfig decodes a rendered podman-kube runtimeConfig. As for
// podman, unknown and repeated keys are refused and every error names the
// field. The manifest must be YAML documents that are mappings with a
// kind; errors never quote the manifest, which may hold secrets.
func parseKubeConfig(text string) (kubeConfig, error) {
	var c kubeConfig
	err := eachField(text, kubeFields, func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			c.GeneralOptions, err = stringList(field, v)
		case "playOptions":
			c.PlayOptions, err = stringList(field, v)
		case "downOptions":
			c.DownOptions, err = stringList(field, v)
		case "controlInterfaceTarget":
			c.Target, err = parseKubeTarget(field, v)
		case "manifest":
			c.Manifest, err = manifestText(field, v)
		case "options":
			err = runtime.BadConfig(field, "unknown field: Ankaios puts playOptions and downOptions at the top level of runtimeConfig")
		default:
			err = runtime.BadConfig(field, "unknown field (expected %s)", kubeFields)
		}
		return err
	})
	if err != nil {
		return kubeConfig{}, err
	}
	if c.Manifest == "" {
		return kubeConfig{}, runtime.BadConfig(root+".manifest", "required")
	}
	return c, nil
}

// manifestText accepts a string of YAML documents, each a mapping with a
// string `kind`: what `podman kube play` reads.
func manifestText(field string, n *yaml.Node) (string, error) {
	if isNull(n) {
		return "", runtime.BadConfig(field, "required")
	}
	if n.Kind != yaml.ScalarNode {
		return "", runtime.BadConfig(field, "expected a string holding Kubernetes YAML (write it as a block scalar: `manifest: |`)")
	}
	if strings.TrimSpace(n.Value) == "" {
		return "", runtime.BadConfig(field, "required")
	}
	if _, err := manifestDocs(field, n.Value); err != nil {
		return "", err
	}
	return n.Value, nil
}

// manifestDocs parses the manifest's documents, skipping empty ones.
func manifestDocs(field, text string) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var docs []*yaml.Node
	for i := 0; ; i++ {
		var d yaml.Node
		err := dec.Decode(&d)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, runtime.BadConfig(field, "document %d is not valid YAML: %v", i+1, err)
		}
		m := resolve(&d)
		if m.Kind == yaml.DocumentNode && len(m.Content) > 0 {
			m = resolve(m.Content[0])
		}
		if m.Kind == yaml.DocumentNode || isNull(m) {
			continue
		}
		if m.Kind != yaml.MappingNode {
			return nil, runtime.BadConfig(field, "document %d: expected a Kubernetes object (a mapping)", i+1)
		}
		kind := mapValue(m, "kind")
		if kind == nil || kind.Kind != yaml.ScalarNode || kind.Value == "" {
			return nil, runtime.BadConfig(field, "document %d: kind is required", i+1)
		}
		docs = append(docs, m)
	}
	if len(docs) == 0 {
		return nil, runtime.BadConfig(field, "holds no Kubernetes object")
	}
	return docs, nil
}

// mapValue is the value of key in mapping m, or nil.
var mapValue = yamlnode.MapValue

// parseKubeTarget reads `<pod>/<container>`, as Ankaios does.
func parseKubeTarget(field string, n *yaml.Node) (kubeTarget, error) {
	if isNull(n) {
		return kubeTarget{}, nil
	}
	if n.Kind != yaml.ScalarNode {
		return kubeTarget{}, runtime.BadConfig(field, "expected a string <pod>/<container>")
	}
	pod, ctr, ok := strings.Cut(n.Value, "/")
	if !ok || pod == "" || ctr == "" || strings.Contains(ctr, "/") {
		return kubeTarget{}, runtime.BadConfig(field, "expected <pod>/<container>, got %q", n.Value)
	}
	return kubeTarget{Pod: pod, Container: ctr}, nil
}

// String is the target as written.
func (t kubeTarget) String() string {
	if t.Pod == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s", t.Pod, t.Container)
}
