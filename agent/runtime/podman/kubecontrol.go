package podman

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// controlVolume names the volume that carries the control interface into
// the target container, as Ankaios names it.
const controlVolume = "control-interface-volume"

// withControlInterface returns the manifest with the control interface
// directory dir mounted at /run/ankaios/control_interface in the
// container controlInterfaceTarget names, as Ankaios does: a hostPath
// volume of type Directory on the pod, a volumeMount on the container.
// The target is a Pod's metadata.name, or a Deployment's with "-pod"
// appended (the pod podman makes of it).
func withControlInterface(cfg kubeConfig, dir string) (string, error) {
	const field = root + ".controlInterfaceTarget"
	if cfg.Target.Pod == "" {
		return "", runtime.BadConfig(field, "required when the workload has control interface access (<pod>/<container>)")
	}
	docs, err := manifestDocs(root+".manifest", cfg.Manifest)
	if err != nil {
		return "", err
	}
	var spec *yaml.Node
	for _, d := range docs {
		kind, name := mapValue(d, "kind"), mapValue(mapValue(d, "metadata"), "name")
		if name == nil || name.Kind != yaml.ScalarNode {
			continue
		}
		switch {
		case kind.Value == "Pod" && name.Value == cfg.Target.Pod:
			spec = mapValue(d, "spec")
		case kind.Value == "Deployment" && name.Value+"-pod" == cfg.Target.Pod:
			spec = mapValue(mapValue(mapValue(d, "spec"), "template"), "spec")
		default:
			continue
		}
		break
	}
	if spec == nil || spec.Kind != yaml.MappingNode {
		return "", runtime.BadConfig(field, "no Pod (or Deployment with the pod name <name>-pod) %q with a spec in the manifest", cfg.Target.Pod)
	}
	var ctr *yaml.Node
	if cs := mapValue(spec, "containers"); cs != nil && cs.Kind == yaml.SequenceNode {
		for _, c := range cs.Content {
			if n := mapValue(c, "name"); n != nil && n.Value == cfg.Target.Container {
				ctr = c
				break
			}
		}
	}
	if ctr == nil || ctr.Kind != yaml.MappingNode {
		return "", runtime.BadConfig(field, "pod %q has no container %q", cfg.Target.Pod, cfg.Target.Container)
	}
	appendTo(ctr, "volumeMounts", mapping("name", controlVolume, "mountPath", runtime.ContainerControlInterface))
	hostPath := mapping("path", dir, "type", "Directory")
	vol := mapping("name", controlVolume)
	vol.Content = append(vol.Content, scalar("hostPath"), hostPath)
	appendTo(spec, "volumes", vol)

	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		out, err := yaml.Marshal(d)
		if err != nil {
			return "", runtime.BadConfig(root+".manifest", "document %d: %v", i+1, err)
		}
		b.Write(out)
	}
	return b.String(), nil
}

// appendTo appends item to the sequence under key of mapping m, making
// the sequence when there is none.
func appendTo(m *yaml.Node, key string, item *yaml.Node) {
	if seq := mapValue(m, key); seq != nil && seq.Kind == yaml.SequenceNode {
		seq.Content = append(seq.Content, item)
		return
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{item}}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if resolve(m.Content[i]).Value == key {
			m.Content[i+1] = seq
			return
		}
	}
	m.Content = append(m.Content, scalar(key), seq)
}

func scalar(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// mapping is a mapping node of string keys and values, given in pairs.
func mapping(kv ...string) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Content = append(m.Content, scalar(kv[i]), scalar(kv[i+1]))
	}
	return m
}
