package workloadpolicy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// inspectPodman reads a podman runtimeConfig: generalOptions go before
// `run`, commandOptions after it, then the image and commandArgs (the
// container's own command, which the policy leaves alone).
func inspectPodman(text string) (*Profile, error) {
	general, command, image, imageField, err := readRunConfig(text)
	if err != nil {
		return nil, err
	}
	f := &finder{}
	judgeGeneral(f, root+".generalOptions", general)
	judgeRun(f, command)
	judgeImage(f, imageField, image)
	requireRestrictedRun(f)
	return f.profile(), nil
}

// judgeRun judges `run` options as podman's flag parser reads them.
func judgeRun(f *finder, command []string) {
	occs, st := readFlags(runOptions, root+".commandOptions", command)
	for _, o := range occs {
		if o.opt.judge != nil {
			o.opt.judge(o, f)
		}
	}
	if st != nil {
		stopped(f, root+".commandOptions", command, st)
	}
}

// readRunConfig reads the keys podman and containerd runtimeConfigs
// share.
func readRunConfig(text string) (general, command []string, image, imageField string, err error) {
	err = topFields(text, func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			general, err = stringList(field, v)
		case "commandOptions":
			command, err = stringList(field, v)
		case "image":
			image, err = scalar(field, v)
			imageField = field
		}
		return err
	})
	return general, command, image, imageField, err
}

// stopped records the items from where pflag stopped reading options:
// the policy cannot tell what podman makes of them, so only privileged
// admits them.
func stopped(f *finder, field string, list []string, st *stop) {
	f.grant(fmt.Sprintf("%s[%d]", field, st.index), fmt.Sprintf("%q", list[st.index:]), Privileged, "%s", st.reason)
	// The items after it may hold anything (an --env value): a message
	// names the first only.
	f.settings[len(f.settings)-1].shown = fmt.Sprintf("%s and what follows", quote(list[st.index]))
}

// judgeGeneral: podman's global options choose its storage, its OCI
// runtime, its hooks, the host it talks to (--url, --connection) and the
// files it writes: each is a way around every other check, so only a
// short list of harmless ones is admitted below privileged.
func judgeGeneral(f *finder, field string, list []string) {
	occs, st := readFlags(globalOptions, field, list)
	for _, o := range occs {
		if o.opt.judge != nil {
			o.opt.judge(o, f)
		}
	}
	if st == nil {
		return
	}
	if st.positional {
		st.reason = fmt.Sprintf("%q is not an option: podman takes it as a subcommand", list[st.index])
	}
	stopped(f, field, list, st)
}

// globalOptions are podman's global options the policy admits, and the
// common ones it refuses by name.
var globalOptions = newTable(nil,
	option{long: "log-level", kind: valueOpt},
	option{long: "syslog", kind: boolOpt},
	option{long: "help", kind: boolOpt},
	option{long: "version", kind: boolOpt},
	option{long: "root", kind: valueOpt, judge: refuse("stores containers in another directory, the storage of other tools or other workloads")},
	option{long: "runroot", kind: valueOpt, judge: refuse("keeps podman's run state in another directory")},
	option{long: "url", kind: valueOpt, judge: refuse("runs the container through another podman service")},
	option{long: "remote", short: 'r', kind: boolOpt, judge: refuse("runs the container through another podman service")},
	option{long: "connection", short: 'c', kind: valueOpt, judge: refuse("runs the container through another podman service")},
	option{long: "identity", kind: valueOpt, judge: refuse("reads an SSH key from the host")},
	option{long: "conmon", kind: valueOpt, judge: refuse("runs another program as conmon, as root")},
	option{long: "runtime", kind: valueOpt, judge: refuse("runs another program as the OCI runtime, as root")},
	option{long: "runtime-flag", kind: valueOpt, judge: refuse("passes options to the OCI runtime")},
	option{long: "hooks-dir", kind: valueOpt, judge: refuse("runs OCI hooks from a host directory, as root")},
	option{long: "module", kind: valueOpt, judge: refuse("loads a containers.conf module from the host")},
	option{long: "config", kind: valueOpt, judge: refuse("reads a podman configuration from the host")},
	option{long: "storage-driver", kind: valueOpt, judge: refuse("changes podman's storage")},
	option{long: "storage-opt", kind: valueOpt, judge: refuse("changes podman's storage")},
	option{long: "imagestore", kind: valueOpt, judge: refuse("changes podman's storage")},
	option{long: "volumepath", kind: valueOpt, judge: refuse("keeps volumes in another host directory")},
	option{long: "tmpdir", kind: valueOpt, judge: refuse("keeps podman's temporary files in another host directory")},
	option{long: "network-cmd-path", kind: valueOpt, judge: refuse("runs another program for the network, as root")},
	option{long: "network-config-dir", kind: valueOpt, judge: refuse("reads network definitions from another host directory")},
	option{long: "cdi-spec-dir", kind: valueOpt, judge: refuse("reads device definitions from another host directory")},
	option{long: "cgroup-manager", kind: valueOpt, judge: refuse("changes how podman places containers in cgroups")},
	option{long: "events-backend", kind: valueOpt, judge: refuse("changes where podman writes its events, which the agent reads")},
	option{long: "db-backend", kind: valueOpt, judge: refuse("changes podman's database")},
	option{long: "transient-store", kind: boolOpt, judge: refuse("changes podman's storage")},
	option{long: "out", kind: valueOpt, judge: refuse("writes podman's output to a host file")},
	option{long: "noout", kind: boolOpt, judge: refuse("hides the container id the agent reads")},
	option{long: "ssh", kind: valueOpt, judge: refuse("runs the container through another podman service")},
)

// refuse judges an option that only privileged admits, whatever its
// value (a bool option set to false excepted).
func refuse(reason string) func(occurrence, *finder) {
	return func(o occurrence, f *finder) {
		if o.opt.kind == boolOpt && !truthy(o.value) {
			return
		}
		f.grant(o.field, canonical(o), Privileged, "%s %s", shown(o), reason)
	}
}

// grantAt judges an option that grants something admitted from need up.
func grantAt(need Level, reason string) func(occurrence, *finder) {
	return func(o occurrence, f *finder) {
		if o.opt.kind == boolOpt && !truthy(o.value) {
			return
		}
		f.grant(o.field, canonical(o), need, "%s %s", shown(o), reason)
	}
}

// narrows judges an option that restricts the container.
func narrows(o occurrence, f *finder) {
	if o.opt.kind == boolOpt && !truthy(o.value) {
		return
	}
	f.narrow(o.field, canonical(o))
}

// truthy reads a bool option's value as pflag does; a value pflag
// refuses (podman then does not run) counts as set.
func truthy(v string) bool {
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// canonical is an option in one form whatever way it was written.
func canonical(o occurrence) string {
	if o.opt.kind == boolOpt {
		return "--" + o.opt.long
	}
	return "--" + o.opt.long + "=" + o.value
}

// shown is an option as a refusal quotes it.
func shown(o occurrence) string { return quote(o.written) }

// runOptions are the options of `podman run`, each with what the policy
// makes of it. An option not listed stops the reading: the policy cannot
// tell whether it takes a value, and so what the items after it are.
var runOptions = newTable(map[string]string{
	"net": "network", "dns-opt": "dns-option",
	"healthcheck-command": "health-cmd", "healthcheck-interval": "health-interval",
	"healthcheck-retries": "health-retries", "healthcheck-start-period": "health-start-period",
	"healthcheck-timeout": "health-timeout",
	"override-arch":       "arch", "override-os": "os", "override-variant": "variant",
},
	// What gives the container the host.
	option{long: "privileged", kind: boolOpt, judge: refuse("gives the container every capability and the host's devices, without confinement")},
	option{long: "volume", short: 'v', kind: valueOpt, judge: judgeVolume},
	option{long: "mount", kind: valueOpt, judge: judgeMount},
	option{long: "device", kind: valueOpt, judge: refuse("gives the container a host device")},
	option{long: "device-cgroup-rule", kind: valueOpt, judge: refuse("lets the container use host devices")},
	option{long: "gpus", kind: valueOpt, judge: refuse("gives the container host devices")},
	option{long: "cap-add", kind: valueOpt, judge: judgeCapAdd},
	option{long: "cap-drop", kind: valueOpt, judge: judgeCapDrop},
	option{long: "security-opt", kind: valueOpt, judge: judgeSecurityOpt},
	option{long: "pid", kind: valueOpt, judge: judgeNamespace("PID")},
	option{long: "network", kind: valueOpt, judge: judgeNamespace("network")},
	option{long: "ipc", kind: valueOpt, judge: judgeNamespace("IPC")},
	option{long: "uts", kind: valueOpt, judge: judgeNamespace("UTS")},
	option{long: "cgroupns", kind: valueOpt, judge: judgeNamespace("cgroup")},
	option{long: "userns", kind: valueOpt, judge: judgeUserns},
	option{long: "uidmap", kind: valueOpt, judge: refuse("maps container uids to host uids of its choosing, another workload's or root")},
	option{long: "gidmap", kind: valueOpt, judge: refuse("maps container gids to host gids of its choosing")},
	option{long: "subuidname", kind: valueOpt, judge: refuse("maps container uids to a host range of its choosing")},
	option{long: "subgidname", kind: valueOpt, judge: refuse("maps container gids to a host range of its choosing")},
	option{long: "user", short: 'u', kind: valueOpt, judge: judgeUser},
	option{long: "group-add", kind: valueOpt, judge: judgeGroupAdd},
	option{long: "sysctl", kind: valueOpt, judge: judgeSysctl},
	option{long: "volumes-from", kind: valueOpt, judge: refuse("mounts the volumes of another container, another workload's")},
	option{long: "pod", kind: valueOpt, judge: refuse("joins a pod, and so the namespaces of the containers in it")},
	option{long: "pod-id-file", kind: valueOpt, judge: refuse("reads a host file and joins the pod it names")},
	option{long: "rootfs", kind: boolOpt, judge: refuse("runs a host directory as the container's root file system")},
	option{long: "env-host", kind: boolOpt, judge: refuse("copies the environment of the agent into the container")},
	option{long: "env-file", kind: valueOpt, judge: refuse("reads a host file (as root) into the container's environment")},
	option{long: "label-file", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "cidfile", kind: valueOpt, judge: refuse("writes a host file as root")},
	option{long: "conmon-pidfile", kind: valueOpt, judge: refuse("writes a host file as root")},
	option{long: "pidfile", kind: valueOpt, judge: refuse("writes a host file as root")},
	option{long: "init-path", kind: valueOpt, judge: refuse("mounts a host file into the container and runs it")},
	option{long: "authfile", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "cert-dir", kind: valueOpt, judge: refuse("reads a host directory as root")},
	option{long: "decryption-key", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "signature-policy", kind: valueOpt, judge: refuse("reads a host file as root")},
	option{long: "hosts-file", kind: valueOpt, judge: refuse("copies a host file into the container")},
	option{long: "hostuser", kind: valueOpt, judge: refuse("copies host accounts into the container")},
	option{long: "cgroup-parent", kind: valueOpt, judge: refuse("puts the container in a cgroup of its choosing")},
	option{long: "cgroups", kind: valueOpt, judge: judgeCgroups},
	option{long: "preserve-fds", kind: valueOpt, judge: refuse("passes the agent's open files to the container")},
	option{long: "preserve-fd", kind: valueOpt, judge: refuse("passes the agent's open files to the container")},
	option{long: "log-driver", kind: valueOpt, judge: judgeLogDriver},
	option{long: "log-opt", kind: valueOpt, judge: judgeLogOpt},
	option{long: "annotation", kind: valueOpt, judge: judgeAnnotationOpt},
	option{long: "sdnotify", kind: valueOpt, judge: judgeSdnotify},
	option{long: "seccomp-policy", kind: valueOpt, judge: judgeSeccompPolicy},
	option{long: "health-log-destination", kind: valueOpt, judge: judgeHealthLog},
	option{long: "secret", kind: valueOpt, judge: grantAt(Restricted, "gives the container a podman secret, which every workload that names it gets")},
	option{long: "read-only", kind: boolOpt, judge: narrows},
	// What stays inside the container.
	option{long: "add-host", kind: valueOpt}, option{long: "arch", kind: valueOpt},
	option{long: "attach", short: 'a', kind: valueOpt}, option{long: "blkio-weight", kind: valueOpt},
	option{long: "blkio-weight-device", kind: valueOpt}, option{long: "cgroup-conf", kind: valueOpt},
	option{long: "chrootdirs", kind: valueOpt}, option{long: "cpu-period", kind: valueOpt},
	option{long: "cpu-quota", kind: valueOpt}, option{long: "cpu-rt-period", kind: valueOpt},
	option{long: "cpu-rt-runtime", kind: valueOpt}, option{long: "cpu-shares", short: 'c', kind: valueOpt},
	option{long: "cpus", kind: valueOpt}, option{long: "cpuset-cpus", kind: valueOpt},
	option{long: "cpuset-mems", kind: valueOpt}, option{long: "creds", kind: valueOpt},
	option{long: "detach-keys", kind: valueOpt}, option{long: "device-read-bps", kind: valueOpt},
	option{long: "device-read-iops", kind: valueOpt}, option{long: "device-write-bps", kind: valueOpt},
	option{long: "device-write-iops", kind: valueOpt}, option{long: "dns", kind: valueOpt},
	option{long: "dns-option", kind: valueOpt}, option{long: "dns-search", kind: valueOpt},
	option{long: "entrypoint", kind: valueOpt}, option{long: "env", short: 'e', kind: valueOpt},
	option{long: "env-merge", kind: valueOpt}, option{long: "expose", kind: valueOpt},
	option{long: "group-entry", kind: valueOpt}, option{long: "health-cmd", kind: valueOpt},
	option{long: "health-interval", kind: valueOpt}, option{long: "health-retries", kind: valueOpt},
	option{long: "health-start-period", kind: valueOpt}, option{long: "health-timeout", kind: valueOpt},
	option{long: "health-on-failure", kind: valueOpt}, option{long: "health-startup-cmd", kind: valueOpt},
	option{long: "health-startup-interval", kind: valueOpt}, option{long: "health-startup-retries", kind: valueOpt},
	option{long: "health-startup-success", kind: valueOpt}, option{long: "health-startup-timeout", kind: valueOpt},
	option{long: "health-max-log-count", kind: valueOpt}, option{long: "health-max-log-size", kind: valueOpt},
	option{long: "hostname", short: 'h', kind: valueOpt}, option{long: "image-volume", kind: valueOpt},
	option{long: "ip", kind: valueOpt}, option{long: "ip6", kind: valueOpt},
	option{long: "kernel-memory", kind: valueOpt}, option{long: "label", short: 'l', kind: valueOpt},
	option{long: "mac-address", kind: valueOpt}, option{long: "memory", short: 'm', kind: valueOpt},
	option{long: "memory-reservation", kind: valueOpt}, option{long: "memory-swap", kind: valueOpt},
	option{long: "memory-swappiness", kind: valueOpt}, option{long: "name", kind: valueOpt},
	option{long: "network-alias", kind: valueOpt}, option{long: "oom-score-adj", kind: valueOpt},
	option{long: "os", kind: valueOpt}, option{long: "passwd-entry", kind: valueOpt},
	option{long: "personality", kind: valueOpt}, option{long: "pids-limit", kind: valueOpt},
	option{long: "platform", kind: valueOpt}, option{long: "publish", short: 'p', kind: valueOpt},
	option{long: "pull", kind: valueOpt}, option{long: "rdt-class", kind: valueOpt},
	option{long: "requires", kind: valueOpt}, option{long: "restart", kind: valueOpt},
	option{long: "retry", kind: valueOpt}, option{long: "retry-delay", kind: valueOpt},
	option{long: "shm-size", kind: valueOpt}, option{long: "shm-size-systemd", kind: valueOpt},
	option{long: "stop-signal", kind: valueOpt}, option{long: "stop-timeout", kind: valueOpt},
	option{long: "systemd", kind: valueOpt}, option{long: "timeout", kind: valueOpt},
	option{long: "tmpfs", kind: valueOpt}, option{long: "tz", kind: valueOpt},
	option{long: "ulimit", kind: valueOpt}, option{long: "umask", kind: valueOpt},
	option{long: "unsetenv", kind: valueOpt}, option{long: "variant", kind: valueOpt},
	option{long: "workdir", short: 'w', kind: valueOpt},
	option{long: "detach", short: 'd', kind: boolOpt}, option{long: "interactive", short: 'i', kind: boolOpt},
	option{long: "tty", short: 't', kind: boolOpt}, option{long: "rm", kind: boolOpt},
	option{long: "rmi", kind: boolOpt}, option{long: "replace", kind: boolOpt},
	option{long: "init", kind: boolOpt}, option{long: "no-healthcheck", kind: boolOpt},
	option{long: "oom-kill-disable", kind: boolOpt}, option{long: "publish-all", short: 'P', kind: boolOpt},
	option{long: "quiet", short: 'q', kind: boolOpt}, option{long: "read-only-tmpfs", kind: boolOpt},
	option{long: "disable-content-trust", kind: boolOpt}, option{long: "http-proxy", kind: boolOpt},
	option{long: "unsetenv-all", kind: boolOpt}, option{long: "sig-proxy", kind: boolOpt},
	option{long: "no-hosts", kind: boolOpt}, option{long: "passwd", kind: boolOpt},
	option{long: "tls-verify", kind: boolOpt}, option{long: "help", kind: boolOpt},
)

// volumeName is what podman takes for a named volume rather than a host
// path (podman's volume name rule).
var volumeName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// judgeVolume reads -v SRC:DST[:OPTIONS]: a source that is not a volume
// name is a host path; a single part is an anonymous volume.
func judgeVolume(o occurrence, f *finder) {
	parts := strings.Split(o.value, ":")
	switch {
	case len(parts) == 1:
		return // an anonymous volume, the container's own
	case len(parts) > 3:
		f.grant(o.field, canonical(o), Privileged, "%s: the policy cannot tell its source from its options", shown(o))
	case volumeName.MatchString(parts[0]):
		f.grant(o.field, canonical(o), Restricted, "%s mounts the named volume %q, which every workload that names it shares", shown(o), parts[0])
	default:
		f.grant(o.field, canonical(o), Privileged, "%s mounts the host path %s", shown(o), quote(parts[0]))
	}
}

// mountKeys are the --mount keys of the mount types admitted below
// privileged.
var mountKeys = []string{"type", "src", "source", "dst", "destination", "target", "ro", "readonly", "rw",
	"relabel", "U", "chown", "nocopy", "copy", "z", "Z", "suid", "nosuid", "exec", "noexec", "dev", "nodev",
	"tmpfs-size", "tmpfs-mode", "tmpcopyup", "notmpcopyup", "size", "mode", "subpath"}

// judgeMount reads --mount type=…,source=…: bind and glob mounts are host
// paths; volume mounts are named volumes (a source that is not a name is
// a host path); tmpfs, ramfs and image mounts are the container's own.
func judgeMount(o occurrence, f *finder) {
	if strings.ContainsAny(o.value, `"'`) {
		// podman reads the value as CSV: quoting can hide a key.
		f.grant(o.field, canonical(o), Privileged, "%s: the policy does not read quoted --mount values", shown(o))
		return
	}
	var typ, src string
	for _, kv := range strings.Split(o.value, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "type":
			typ = v
		case "src", "source":
			src = v
		}
		if !slices.Contains(mountKeys, k) {
			f.grant(o.field, canonical(o), Privileged, "%s: the policy does not know the --mount key %q", shown(o), k)
			return
		}
	}
	switch typ {
	case "tmpfs", "ramfs", "image":
	case "volume":
		switch {
		case src == "":
		case volumeName.MatchString(src):
			f.grant(o.field, canonical(o), Restricted, "%s mounts the named volume %q, which every workload that names it shares", shown(o), src)
		default:
			f.grant(o.field, canonical(o), Privileged, "%s mounts the host path %s", shown(o), quote(src))
		}
	case "bind", "glob":
		f.grant(o.field, canonical(o), Privileged, "%s mounts the host path %s", shown(o), quote(src))
	case "":
		f.grant(o.field, canonical(o), Privileged, "%s names no mount type", shown(o))
	default:
		f.grant(o.field, canonical(o), Privileged, "%s: the policy admits only bind, volume, tmpfs, ramfs and image mounts below privileged", shown(o))
	}
}

// baselineCaps are the capabilities Pod Security baseline lets a
// container add: those container runtimes give by default.
var baselineCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// capName is a capability as podman compares it.
func capName(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

// capNeed is the least level that lets a container add the capability
// c: restricted only NET_BIND_SERVICE, baseline the default set.
func capNeed(c string) Level {
	switch {
	case c == "NET_BIND_SERVICE":
		return Restricted
	case slices.Contains(baselineCaps, c):
		return Baseline
	}
	return Privileged
}

func judgeCapAdd(o occurrence, f *finder) {
	for _, c := range strings.Split(o.value, ",") {
		c = capName(c)
		if c == "" {
			continue
		}
		f.grant(o.field, "--cap-add="+c, capNeed(c), "%s adds the capability %s", shown(o), c)
	}
}

func judgeCapDrop(o occurrence, f *finder) {
	for _, c := range strings.Split(o.value, ",") {
		if c = capName(c); c != "" {
			f.narrow(o.field, "--cap-drop="+c)
		}
	}
}

// allowedSELinuxTypes are the SELinux types Pod Security admits.
var allowedSELinuxTypes = []string{"container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

// judgeSecurityOpt reads --security-opt KEY=VALUE (or KEY:VALUE).
func judgeSecurityOpt(o occurrence, f *finder) {
	key, val, ok := strings.Cut(o.value, "=")
	if !ok {
		key, val, _ = strings.Cut(o.value, ":")
	}
	key, lval := lower(key), lower(val)
	switch key {
	case "no-new-privileges":
		if val == "" || truthy(val) {
			f.narrow(o.field, "--security-opt=no-new-privileges")
		}
	case "mask":
		f.narrow(o.field, canonical(o))
	case "seccomp":
		f.grant(o.field, canonical(o), Privileged, "%s replaces the default seccomp filter", shown(o))
	case "apparmor":
		if lval == "unconfined" {
			f.grant(o.field, canonical(o), Privileged, "%s runs the container without AppArmor", shown(o))
		} else {
			f.grant(o.field, canonical(o), Baseline, "%s runs the container under another AppArmor profile", shown(o))
		}
	case "label":
		t, v, _ := strings.Cut(val, ":")
		switch {
		case lower(t) == "type" && slices.Contains(allowedSELinuxTypes, v), lower(t) == "level":
			f.grant(o.field, canonical(o), Restricted, "%s sets the container's SELinux label", shown(o))
		default:
			f.grant(o.field, canonical(o), Privileged, "%s changes the container's SELinux confinement", shown(o))
		}
	case "unmask":
		f.grant(o.field, canonical(o), Privileged, "%s exposes the kernel's paths in /proc and /sys", shown(o))
	case "systempaths":
		if lval == "unconfined" {
			f.grant(o.field, canonical(o), Privileged, "%s exposes the kernel's paths in /proc and /sys", shown(o))
		}
	default:
		f.grant(o.field, canonical(o), Privileged, "%s: the policy does not know this security option", shown(o))
	}
}

// judgeNamespace reads --pid, --network, --ipc, --uts and --cgroupns:
// the host's namespace, or another container's, or one at a host path,
// is shared with what runs there.
func judgeNamespace(what string) func(occurrence, *finder) {
	return func(o occurrence, f *finder) {
		v := lower(o.value)
		switch {
		case v == "host":
			f.grant(o.field, canonical(o), Privileged, "%s shares the host's %s namespace", shown(o), what)
		case strings.HasPrefix(v, "container:"):
			f.grant(o.field, canonical(o), Privileged, "%s joins the %s namespace of another container, another workload's", shown(o), what)
		case strings.HasPrefix(v, "ns:"):
			f.grant(o.field, canonical(o), Privileged, "%s joins a %s namespace of the host", shown(o), what)
		}
	}
}

// judgeUserns reads --userns: a user namespace of the container's own
// narrows it; the host's is podman's default for root and admitted at
// baseline; another's only at privileged.
func judgeUserns(o occurrence, f *finder) {
	v := lower(o.value)
	mode, _, _ := strings.Cut(v, ":")
	switch mode {
	case "":
	case "auto", "nomap", "keep-id", "private":
		f.narrow(o.field, canonical(o))
	case "host":
		f.grant(o.field, canonical(o), Baseline, "%s runs the container in the host's user namespace", shown(o))
	default:
		f.grant(o.field, canonical(o), Privileged, "%s joins a user namespace of the host or of another container", shown(o))
	}
}

// judgeUser reads --user USER[:GROUP]. A numeric non-root uid narrows
// (and restricted requires one); root, or a name the image resolves,
// may be root in the container.
func judgeUser(o occurrence, f *finder) {
	u, _, _ := strings.Cut(o.value, ":")
	n, err := strconv.ParseUint(u, 10, 32)
	switch {
	case err == nil && n != 0:
		f.settings = append(f.settings, Setting{Field: o.field, Key: canonical(o), Need: Restricted, Narrows: true, uid: int64(n)})
	case err == nil || u == "root":
		f.grant(o.field, canonical(o), Baseline, "%s runs the container's process as root", shown(o))
	default:
		f.grant(o.field, canonical(o), Baseline, "%s runs the container's process as a user the image names, perhaps root", shown(o))
	}
}

func judgeGroupAdd(o occurrence, f *finder) {
	for _, g := range strings.Split(o.value, ",") {
		switch g = strings.TrimSpace(g); g {
		case "":
		case "keep-groups":
			f.grant(o.field, "--group-add=keep-groups", Privileged, "%s keeps the supplementary groups of podman's caller, the agent", shown(o))
		default:
			f.grant(o.field, "--group-add="+g, Baseline, "%s adds the group %q", shown(o), g)
		}
	}
}

// safeSysctls are the sysctls Pod Security baseline admits: namespaced,
// and harmless to other containers.
var safeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}

func judgeSysctl(o occurrence, f *finder) {
	for _, kv := range strings.Split(o.value, ",") {
		k, _, _ := strings.Cut(kv, "=")
		k = strings.ReplaceAll(strings.TrimSpace(k), "/", ".")
		if k != "" && !slices.Contains(safeSysctls, k) {
			f.grant(o.field, "--sysctl="+kv, Privileged, "%s sets the sysctl %q, which is not one of the safe ones", shown(o), k)
		}
	}
}

func judgeCgroups(o occurrence, f *finder) {
	if v := lower(o.value); v != "" && v != "enabled" {
		f.grant(o.field, canonical(o), Privileged, "%s runs the container without a cgroup of its own", shown(o))
	}
}

func judgeLogDriver(o occurrence, f *finder) {
	switch lower(o.value) {
	case "", "k8s-file", "journald", "none", "json-file":
	default:
		f.grant(o.field, canonical(o), Privileged, "%s: the policy admits the log drivers k8s-file, journald and none below privileged", shown(o))
	}
}

func judgeLogOpt(o occurrence, f *finder) {
	for _, kv := range strings.Split(o.value, ",") {
		if k, _, _ := strings.Cut(kv, "="); lower(k) == "path" {
			f.grant(o.field, "--log-opt="+kv, Privileged, "%s writes the container's log to a host path, as root", shown(o))
		}
	}
}

func judgeSdnotify(o occurrence, f *finder) {
	if lower(o.value) == "container" {
		f.grant(o.field, canonical(o), Privileged, "%s gives the container podman's systemd notification socket", shown(o))
	}
}

func judgeSeccompPolicy(o occurrence, f *finder) {
	if v := lower(o.value); v != "" && v != "default" {
		f.grant(o.field, canonical(o), Privileged, "%s lets the image choose the seccomp filter", shown(o))
	}
}

func judgeHealthLog(o occurrence, f *finder) {
	switch lower(o.value) {
	case "", "local", "events_logger":
	default:
		f.grant(o.field, canonical(o), Privileged, "%s writes health check logs to a host directory, as root", shown(o))
	}
}

func judgeAnnotationOpt(o occurrence, f *finder) {
	k, v, _ := strings.Cut(o.value, "=")
	judgeAnnotation(f, o.field, "", k, v, shown(o))
}

// judgeAnnotation classifies an annotation: podman and its OCI runtime
// read some as settings (crun's run.oci.*, podman's own, seccomp and
// AppArmor profiles); only privileged admits those that change
// confinement.
func judgeAnnotation(f *finder, field, keyPrefix, k, v, shownAs string) {
	lk, lv := lower(k), lower(v)
	key := keyPrefix + "annotation " + k + "=" + v
	switch {
	case strings.Contains(lk, "seccomp"):
		if lv != "runtime/default" && lv != "docker/default" {
			f.grant(field, key, Privileged, "%s chooses the seccomp filter", shownAs)
		}
	case strings.Contains(lk, "apparmor"):
		switch {
		case lv == "runtime/default":
		case strings.HasPrefix(lv, "localhost/"):
			f.grant(field, key, Baseline, "%s chooses the AppArmor profile", shownAs)
		default:
			f.grant(field, key, Privileged, "%s changes the AppArmor confinement", shownAs)
		}
	case lk == "io.podman.annotations.init", lk == "io.podman.annotations.autoremove", lk == "io.podman.annotations.infra.name":
	case strings.HasPrefix(lk, "io.podman.annotations."), strings.HasPrefix(lk, "run.oci."),
		strings.HasPrefix(lk, "io.kubernetes.cri-o."), strings.HasPrefix(lk, "org.systemd."),
		strings.HasPrefix(lk, "io.containers.trace-syscall"):
		f.grant(field, key, Privileged, "%s is read by podman or its OCI runtime as a setting", shownAs)
	}
}

// imageTransports are the image references podman reads from the host
// (an archive, a directory, another storage) instead of a registry.
var imageTransports = []string{"dir", "docker-archive", "oci-archive", "oci", "containers-storage", "docker-daemon", "ostree", "sif", "tarball"}

func judgeImage(f *finder, field, image string) {
	image = strings.TrimSpace(image)
	if t, _, ok := strings.Cut(image, ":"); ok && slices.Contains(imageTransports, lower(t)) {
		f.grant(field, "image "+image, Privileged, "the image %s is read from the host (%s:), as root", quote(image), t)
	}
}

// requireRestrictedRun lists what restricted requires of a container:
// every capability dropped, no privilege gained through setuid files, a
// non-root uid.
func requireRestrictedRun(f *finder) {
	var dropAll, noNewPrivs, nonRoot bool
	for _, s := range f.settings {
		switch {
		case s.Key == "--cap-drop=ALL":
			dropAll = true
		case s.Key == "--security-opt=no-new-privileges":
			noNewPrivs = true
		case s.uid > 0:
			nonRoot = true
		}
	}
	field := root + ".commandOptions"
	if !dropAll {
		f.require(field, "--cap-drop=ALL", "restricted needs --cap-drop=ALL (the container may add back NET_BIND_SERVICE only)")
	}
	if !noNewPrivs {
		f.require(field, "--security-opt=no-new-privileges", "restricted needs --security-opt=no-new-privileges")
	}
	if !nonRoot {
		f.require(field, "--user", "restricted needs --user with a numeric uid other than 0")
	}
}
