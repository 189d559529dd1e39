package workloadpolicy

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// inspectKube reads a podman-kube runtimeConfig: generalOptions go
// before `kube play`, playOptions after it, downOptions after
// `kube down`, and the manifest's pods carry their own security
// settings.
func inspectKube(text string) (*Profile, error) {
	var general, play, down []string
	var manifest string
	err := topFields(text, func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			general, err = stringList(field, v)
		case "playOptions":
			play, err = stringList(field, v)
		case "downOptions":
			down, err = stringList(field, v)
		case "manifest":
			manifest, err = scalar(field, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f := &finder{}
	judgeGeneral(f, root+".generalOptions", general)
	judgeList(f, playOptions, root+".playOptions", play, "`podman kube play` reads no arguments but the manifest")
	judgeList(f, downOptions, root+".downOptions", down, "`podman kube down` reads no arguments but the manifest")
	if err := judgeManifest(f, root+".manifest", manifest); err != nil {
		return nil, err
	}
	return f.profile(), nil
}

// judgeList judges a list of options of a subcommand that takes no
// argument of the workload's.
func judgeList(f *finder, t optionTable, field string, list []string, positional string) {
	occs, st := readFlags(t, field, list)
	for _, o := range occs {
		if o.opt.judge != nil {
			o.opt.judge(o, f)
		}
	}
	if st != nil {
		if st.positional {
			st.reason = fmt.Sprintf("%q is not an option: %s", list[st.index], positional)
		}
		stopped(f, field, list, st)
	}
}

// playOptions are the options of `podman kube play`.
var playOptions = newTable(map[string]string{"net": "network"},
	option{long: "annotation", kind: valueOpt, judge: judgeAnnotationOpt},
	option{long: "authfile", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "build", kind: boolOpt, judge: refuse("builds images from a host directory, as root")},
	option{long: "cert-dir", kind: valueOpt, judge: refuse("reads a host directory as root")},
	option{long: "configmap", kind: valueOpt, judge: refuse("reads a host file (as root) into the pod")},
	option{long: "context-dir", kind: valueOpt, judge: refuse("builds images from a host directory, as root")},
	option{long: "seccomp-profile-root", kind: valueOpt, judge: refuse("reads seccomp filters from a host directory")},
	option{long: "signature-policy", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "service-container", kind: boolOpt, judge: refuse("starts a service container for systemd")},
	option{long: "log-driver", kind: valueOpt, judge: judgeLogDriver},
	option{long: "log-opt", kind: valueOpt, judge: judgeLogOpt},
	option{long: "network", kind: valueOpt, judge: judgeNamespace("network")},
	option{long: "userns", kind: valueOpt, judge: judgeUserns},
	option{long: "creds", kind: valueOpt}, option{long: "ip", kind: valueOpt},
	option{long: "mac-address", kind: valueOpt}, option{long: "publish", kind: valueOpt},
	option{long: "exit-code-propagation", kind: valueOpt},
	option{long: "no-hosts", kind: boolOpt}, option{long: "no-pod-prefix", kind: boolOpt},
	option{long: "publish-all", kind: boolOpt}, option{long: "quiet", short: 'q', kind: boolOpt},
	option{long: "replace", kind: boolOpt}, option{long: "start", kind: boolOpt},
	option{long: "tls-verify", kind: boolOpt}, option{long: "wait", short: 'w', kind: boolOpt},
	option{long: "help", kind: boolOpt},
)

// downOptions are the options of `podman kube down`.
var downOptions = newTable(nil,
	option{long: "force", kind: boolOpt}, option{long: "help", kind: boolOpt},
)

// judgeManifest reads the manifest's objects as `podman kube play` does:
// pods (alone or in a Deployment, DaemonSet or Job), persistent volume
// claims (named volumes), ConfigMaps and Secrets.
func judgeManifest(f *finder, field, manifest string) error {
	dec := yaml.NewDecoder(strings.NewReader(manifest))
	for i := 1; ; i++ {
		var d yaml.Node
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return parseErr(field, "document %d is not valid YAML: %v", i, err)
		}
		m := resolve(&d)
		if m.Kind == yaml.DocumentNode && len(m.Content) > 0 {
			m = resolve(m.Content[0])
		}
		if m.Kind != yaml.MappingNode {
			continue // the runtime refuses it
		}
		kind := text(mapValue(m, "kind"))
		name := text(mapValue(mapValue(m, "metadata"), "name"))
		o := object{f: f, field: field, where: fmt.Sprintf("document %d (%s %q)", i, kind, name), key: kind + "/" + name}
		switch kind {
		case "":
		case "Pod":
			o.annotations(mapValue(m, "metadata"))
			o.pod(mapValue(m, "spec"))
		case "Deployment", "DaemonSet", "Job":
			tmpl := mapValue(mapValue(m, "spec"), "template")
			o.annotations(mapValue(m, "metadata"))
			o.annotations(mapValue(tmpl, "metadata"))
			o.pod(mapValue(tmpl, "spec"))
		case "PersistentVolumeClaim":
			f.grant(field, o.key, Restricted, "%s: a persistent volume claim is the named volume %q, which every workload that names it shares", o.where, name)
			mapKeys(mapValue(mapValue(m, "metadata"), "annotations"), func(k string, v *yaml.Node) {
				if strings.HasPrefix(k, "volume.podman.io/") && k != "volume.podman.io/uid" && k != "volume.podman.io/gid" {
					o.grant("metadata.annotations."+k, Privileged, "makes the volume from a host device, path or driver (%s)", k)
				}
			})
		case "ConfigMap", "Secret":
		default:
			f.grant(field, o.key, Privileged, "%s: the policy does not know what podman makes of a %s", o.where, kind)
		}
	}
}

// object is one Kubernetes object of a manifest being judged.
type object struct {
	f     *finder
	field string // runtimeConfig.manifest
	where string // how a refusal names the object
	key   string // how a setting's key names it
}

func (o object) grant(path string, need Level, format string, args ...any) {
	o.f.grant(o.field, o.key+"/"+path, need, "%s, %s: %s", o.where, path, fmt.Sprintf(format, args...))
}

func (o object) narrow(path string) { o.f.narrow(o.field, o.key+"/"+path) }

func (o object) annotations(meta *yaml.Node) {
	mapKeys(mapValue(meta, "annotations"), func(k string, v *yaml.Node) {
		judgeAnnotation(o.f, o.field, o.key+"/", k, text(v), fmt.Sprintf("%s, the annotation %q", o.where, k))
	})
}

// pod judges a pod spec and, for restricted, what each container lacks.
func (o object) pod(spec *yaml.Node) {
	for _, ns := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if yamlTrue(mapValue(spec, ns)) {
			o.grant("spec."+ns, Privileged, "shares the host's namespace")
		}
	}
	if yamlFalse(mapValue(spec, "hostUsers")) {
		o.narrow("spec.hostUsers")
	}
	psc := mapValue(spec, "securityContext")
	o.securityContext("spec.securityContext", psc, false)
	mapKeys(psc, func(k string, v *yaml.Node) {
		if k != "sysctls" {
			return
		}
		for _, s := range items(v) {
			if n := text(mapValue(s, "name")); !slices.Contains(safeSysctls, strings.ReplaceAll(n, "/", ".")) {
				o.grant("spec.securityContext.sysctls."+n, Privileged, "is not one of the safe sysctls")
			}
		}
	})
	for _, v := range items(mapValue(spec, "volumes")) {
		o.volume(v)
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for i, c := range items(mapValue(spec, list)) {
			name := text(mapValue(c, "name"))
			path := fmt.Sprintf("spec.%s[%d] (%s)", list, i, name)
			if name != "" {
				path = fmt.Sprintf("spec.%s[%s]", list, name)
			}
			o.container(path, c, psc)
		}
	}
}

// volume judges one pod volume by its source.
func (o object) volume(v *yaml.Node) {
	name := text(mapValue(v, "name"))
	path := "spec.volumes[" + name + "]"
	mapKeys(v, func(k string, src *yaml.Node) {
		switch k {
		case "name", "configMap", "emptyDir", "downwardAPI", "projected", "image":
		case "hostPath":
			o.grant(path+".hostPath", Privileged, "mounts the host path %s", quote(text(mapValue(src, "path"))))
		case "persistentVolumeClaim":
			o.grant(path+".persistentVolumeClaim", Restricted, "mounts the named volume %q, which every workload that names it shares", text(mapValue(src, "claimName")))
		case "secret":
			o.grant(path+".secret", Restricted, "mounts the secret %q, which every workload that names it gets", text(mapValue(src, "secretName")))
		default:
			o.grant(path+"."+k, Privileged, "the policy admits only configMap, emptyDir, downwardAPI, projected, image, secret and persistentVolumeClaim volumes below privileged")
		}
	})
}

// container judges one container; psc is its pod's securityContext,
// which supplies what the container's own does not set.
func (o object) container(path string, c, psc *yaml.Node) {
	if img := strings.TrimSpace(text(mapValue(c, "image"))); img != "" {
		if t, _, ok := strings.Cut(img, ":"); ok && slices.Contains(imageTransports, lower(t)) {
			o.grant(path+".image", Privileged, "the image %s is read from the host (%s:), as root", quote(img), t)
		}
	}
	if mapValue(c, "volumeDevices") != nil {
		o.grant(path+".volumeDevices", Privileged, "gives the container a block device")
	}
	sc := mapValue(c, "securityContext")
	o.securityContext(path+".securityContext", sc, true)

	// Restricted: every capability dropped, no privilege escalation, a
	// non-root user and a seccomp filter, the pod's settings counting
	// where the container sets none.
	field := func(n *yaml.Node, key string) *yaml.Node {
		if v := mapValue(n, key); v != nil {
			return v
		}
		return mapValue(psc, key)
	}
	if !slices.ContainsFunc(items(mapValue(mapValue(sc, "capabilities"), "drop")), func(n *yaml.Node) bool { return capName(text(n)) == "ALL" }) {
		o.require(path+".securityContext.capabilities.drop", "restricted needs it to hold ALL")
	}
	if !yamlFalse(mapValue(sc, "allowPrivilegeEscalation")) {
		o.require(path+".securityContext.allowPrivilegeEscalation", "restricted needs it false")
	}
	if uid, ok := intValue(field(sc, "runAsUser")); !(yamlTrue(field(sc, "runAsNonRoot")) || ok && uid > 0) {
		o.require(path+".securityContext.runAsNonRoot", "restricted needs runAsNonRoot true or a runAsUser other than 0")
	}
	switch text(mapValue(field(sc, "seccompProfile"), "type")) {
	case "RuntimeDefault", "Localhost":
	default:
		o.require(path+".securityContext.seccompProfile", "restricted needs type RuntimeDefault or Localhost")
	}
}

func (o object) require(path, reason string) {
	o.f.require(o.field, o.key+"/"+path, "%s, %s: %s", o.where, path, reason)
}

// securityContext judges a pod's or a container's securityContext.
func (o object) securityContext(path string, sc *yaml.Node, container bool) {
	if sc == nil {
		return
	}
	at := func(k string) string { return path + "." + k }
	if container && yamlTrue(mapValue(sc, "privileged")) {
		o.grant(at("privileged"), Privileged, "gives the container every capability and the host's devices, without confinement")
	}
	if v := mapValue(sc, "allowPrivilegeEscalation"); v != nil {
		if yamlFalse(v) {
			o.narrow(at("allowPrivilegeEscalation"))
		} else {
			o.grant(at("allowPrivilegeEscalation"), Baseline, "lets the container's processes gain privileges")
		}
	}
	caps := mapValue(sc, "capabilities")
	for _, c := range items(mapValue(caps, "add")) {
		n := capName(text(c))
		o.grant(at("capabilities.add."+n), capNeed(n), "adds the capability %s", n)
	}
	for _, c := range items(mapValue(caps, "drop")) {
		o.narrow(at("capabilities.drop." + capName(text(c))))
	}
	if v := mapValue(sc, "runAsUser"); v != nil {
		if uid, ok := intValue(v); ok && uid > 0 {
			o.f.settings = append(o.f.settings, Setting{Field: o.field, Key: o.key + "/" + at("runAsUser") + "=" + text(v), Need: Restricted, Narrows: true, uid: uid})
		} else {
			o.grant(at("runAsUser"), Baseline, "runs the container's process as root")
		}
	}
	if yamlTrue(mapValue(sc, "runAsNonRoot")) {
		o.narrow(at("runAsNonRoot"))
	}
	if yamlTrue(mapValue(sc, "readOnlyRootFilesystem")) {
		o.narrow(at("readOnlyRootFilesystem"))
	}
	if v := text(mapValue(sc, "procMount")); v != "" && v != "Default" {
		o.grant(at("procMount"), Privileged, "exposes the kernel's paths in /proc")
	}
	if se := mapValue(sc, "seLinuxOptions"); se != nil {
		t := text(mapValue(se, "type"))
		switch {
		case text(mapValue(se, "user")) != "" || text(mapValue(se, "role")) != "":
			o.grant(at("seLinuxOptions"), Privileged, "sets the SELinux user or role")
		case t != "" && !slices.Contains(allowedSELinuxTypes, t):
			o.grant(at("seLinuxOptions.type"), Privileged, "changes the container's SELinux confinement (%s)", t)
		case t != "" || text(mapValue(se, "level")) != "":
			o.grant(at("seLinuxOptions"), Restricted, "sets the SELinux label")
		}
	}
	switch text(mapValue(mapValue(sc, "seccompProfile"), "type")) {
	case "":
	case "RuntimeDefault":
		o.narrow(at("seccompProfile"))
	case "Localhost":
		o.grant(at("seccompProfile"), Restricted, "uses a seccomp filter of the host")
	default:
		o.grant(at("seccompProfile"), Privileged, "runs the container without the default seccomp filter")
	}
	switch text(mapValue(mapValue(sc, "appArmorProfile"), "type")) {
	case "", "RuntimeDefault":
	case "Localhost":
		o.grant(at("appArmorProfile"), Baseline, "uses another AppArmor profile")
	default:
		o.grant(at("appArmorProfile"), Privileged, "runs the container without AppArmor")
	}
	if yamlTrue(mapValue(mapValue(sc, "windowsOptions"), "hostProcess")) {
		o.grant(at("windowsOptions.hostProcess"), Privileged, "runs the container as a host process")
	}
}

// podman decodes manifests with a YAML 1.1 reader, where yes, on and y
// are true: a bool that grants counts as set unless it is plainly false,
// and one that restricts only when it is plainly true.
func yamlTrue(n *yaml.Node) bool {
	if n == nil || isNull(n) {
		return false
	}
	return !yamlFalse(n)
}

func yamlFalse(n *yaml.Node) bool {
	if n == nil || isNull(n) {
		return false
	}
	switch lower(text(n)) {
	case "false", "no", "off", "n":
		return true
	}
	return false
}

// intValue reads an integer in any notation YAML 1.1 allows (0x10,
// 010, 1_000).
func intValue(n *yaml.Node) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(text(n)), 0, 64)
	return v, err == nil
}
