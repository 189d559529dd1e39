package workloadpolicy

import (
	"errors"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// restrictedOpts is what restricted requires of a podman container.
const restrictedOpts = `"--cap-drop=ALL", "--security-opt=no-new-privileges", "--user=1000"`

func podman(opts string) string { return "image: img\ncommandOptions: [" + opts + "]" }

func podmanGeneral(opts string) string { return "image: img\ngeneralOptions: [" + opts + "]" }

func kube(manifest string) string {
	return "manifest: |\n  " + strings.ReplaceAll(strings.TrimSpace(manifest), "\n", "\n  ")
}

const restrictedPod = `
kind: Pod
metadata: {name: web}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: img
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
`

// Each row: a workload, and for each level "" (admitted) or the field
// and a word of the reason the refusal names.
func TestCheckLevels(t *testing.T) {
	type want struct{ field, reason string }
	ok := want{}
	tests := []struct {
		name                             string
		runtime, config                  string
		privileged, baseline, restricted want
	}{
		// process
		{"process without user", "process", "command: sleep", ok, ok, ok},
		{"process user root", "process", "command: sleep\nuser: root", ok, want{"runtimeConfig.user", "is root"}, want{"runtimeConfig.user", "root"}},
		{"process user 0", "process", "command: sleep\nuser: '0'", ok, want{"runtimeConfig.user", "root"}, want{"runtimeConfig.user", "root"}},
		{"process user 000", "process", "command: sleep\nuser: '000'", ok, want{"runtimeConfig.user", "root"}, want{"runtimeConfig.user", "root"}},
		{"process other user", "process", "command: sleep\nuser: alice", ok, ok, want{"runtimeConfig.user", "instead of a uid of the workload's own"}},
		{"process user not a string", "process", "command: sleep\nuser: [a]", ok, want{"runtimeConfig.user", "expected a string"}, want{"runtimeConfig.user", "expected a string"}},
		{"process user twice", "process", "command: sleep\nuser: a\nuser: root", ok, want{"runtimeConfig.user", "more than once"}, want{"runtimeConfig.user", "more than once"}},

		// podman: the audit's hole 3 and its spellings
		{"plain podman", "podman", podman(`"-p", "8080:80", "--env", "A=1"`), ok, ok, want{"runtimeConfig.commandOptions", "--cap-drop=ALL"}},
		{"restricted podman", "podman", podman(restrictedOpts), ok, ok, ok},
		{"--privileged", "podman", podman(`"--privileged"`), ok, want{"runtimeConfig.commandOptions[0]", "every capability"}, want{"runtimeConfig.commandOptions[0]", "every capability"}},
		{"--privileged=true", "podman", podman(`"--privileged=true"`), ok, want{"runtimeConfig.commandOptions[0]", "every capability"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--privileged=false", "podman", podman(`"--privileged=false", ` + restrictedOpts), ok, ok, ok},
		{"host root mounted", "podman", podman(`"-v", "/:/host"`), ok, want{"runtimeConfig.commandOptions[0]", `host path "/"`}, want{"runtimeConfig.commandOptions[0]", "host path"}},
		{"-v=/:/host", "podman", podman(`"-v=/:/host"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"-v/:/host", "podman", podman(`"-v/:/host"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"-itv /:/host combined", "podman", podman(`"-itv", "/:/host"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--volume relative path", "podman", podman(`"--volume=./etc:/x"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"named volume", "podman", podman(`"-v", "data:/data", ` + restrictedOpts), ok, ok, ok},
		{"anonymous volume", "podman", podman(`"-v", "/data", ` + restrictedOpts), ok, ok, ok},
		{"--mount bind", "podman", podman(`"--mount", "type=bind,source=/etc,target=/x"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--mount volume with a path", "podman", podman(`"--mount=type=volume,src=/etc,dst=/x"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--mount named volume", "podman", podman(`"--mount=type=volume,src=data,dst=/x,ro", ` + restrictedOpts), ok, ok, ok},
		{"--mount tmpfs", "podman", podman(`"--mount=type=tmpfs,dst=/x", ` + restrictedOpts), ok, ok, ok},
		{"--mount quoted", "podman", podman(`"--mount=type=volume,\"src=x,type=bind\",dst=/x"`), ok, want{"runtimeConfig.commandOptions[0]", "quoted"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--mount unknown key", "podman", podman(`"--mount=type=volume,src=x,dst=/y,volume-opt=device=/"`), ok, want{"runtimeConfig.commandOptions[0]", "volume-opt"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--device", "podman", podman(`"--device=/dev/sda"`), ok, want{"runtimeConfig.commandOptions[0]", "host device"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--cap-add SYS_ADMIN", "podman", podman(`"--cap-add", "SYS_ADMIN"`), ok, want{"runtimeConfig.commandOptions[0]", "SYS_ADMIN"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--cap-add cap_sys_admin list", "podman", podman(`"--cap-add=chown,cap_sys_admin"`), ok, want{"runtimeConfig.commandOptions[0]", "SYS_ADMIN"}, want{"runtimeConfig.commandOptions[0]", "CHOWN"}},
		{"--cap-add ALL", "podman", podman(`"--cap-add=all"`), ok, want{"runtimeConfig.commandOptions[0]", "ALL"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--cap-add a default cap", "podman", podman(`"--cap-add=KILL"`), ok, ok, want{"runtimeConfig.commandOptions[0]", "KILL"}},
		{"--cap-add NET_BIND_SERVICE", "podman", podman(`"--cap-add=NET_BIND_SERVICE", ` + restrictedOpts), ok, ok, ok},
		{"seccomp unconfined", "podman", podman(`"--security-opt", "seccomp=unconfined"`), ok, want{"runtimeConfig.commandOptions[0]", "seccomp"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"label disable", "podman", podman(`"--security-opt=label=disable"`), ok, want{"runtimeConfig.commandOptions[0]", "SELinux"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"apparmor unconfined", "podman", podman(`"--security-opt=apparmor:unconfined"`), ok, want{"runtimeConfig.commandOptions[0]", "AppArmor"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"unmask", "podman", podman(`"--security-opt=unmask=ALL"`), ok, want{"runtimeConfig.commandOptions[0]", "/proc"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--pid host", "podman", podman(`"--pid", "host"`), ok, want{"runtimeConfig.commandOptions[0]", "host's PID"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--net=host", "podman", podman(`"--net=host"`), ok, want{"runtimeConfig.commandOptions[0]", "host's network"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--network container:", "podman", podman(`"--network=container:other"`), ok, want{"runtimeConfig.commandOptions[0]", "another container"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--ipc host", "podman", podman(`"--ipc=host"`), ok, want{"runtimeConfig.commandOptions[0]", "IPC"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--uts host", "podman", podman(`"--uts=host"`), ok, want{"runtimeConfig.commandOptions[0]", "UTS"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--cgroupns host", "podman", podman(`"--cgroupns=host"`), ok, want{"runtimeConfig.commandOptions[0]", "cgroup"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--userns host", "podman", podman(`"--userns=host"`), ok, ok, want{"runtimeConfig.commandOptions[0]", "user namespace"}},
		{"--userns ns:", "podman", podman(`"--userns=ns:/proc/1/ns/user"`), ok, want{"runtimeConfig.commandOptions[0]", "user namespace"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--userns auto", "podman", podman(`"--userns=auto", ` + restrictedOpts), ok, ok, ok},
		{"--network bridge", "podman", podman(`"--network=bridge", ` + restrictedOpts), ok, ok, ok},
		{"--user root", "podman", podman(`"--user", "root"`), ok, ok, want{"runtimeConfig.commandOptions[0]", "root"}},
		{"-u 0:0", "podman", podman(`"-u0:0"`), ok, ok, want{"runtimeConfig.commandOptions[0]", "root"}},
		{"--user name at restricted", "podman", podman(`"--cap-drop=ALL", "--security-opt=no-new-privileges", "--user=nobody"`), ok, ok, want{"runtimeConfig.commandOptions[2]", "the image names"}},
		{"--uidmap", "podman", podman(`"--uidmap=0:60001:1"`), ok, want{"runtimeConfig.commandOptions[0]", "host uids"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--volumes-from", "podman", podman(`"--volumes-from=victim"`), ok, want{"runtimeConfig.commandOptions[0]", "another container"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--env-file reads a host file", "podman", podman(`"--env-file=/root/secret"`), ok, want{"runtimeConfig.commandOptions[0]", "host file"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--env-host", "podman", podman(`"--env-host"`), ok, want{"runtimeConfig.commandOptions[0]", "environment of the agent"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--rootfs", "podman", podman(`"--rootfs"`), ok, want{"runtimeConfig.commandOptions[0]", "host directory"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"unsafe sysctl", "podman", podman(`"--sysctl=kernel.core_pattern=|/x"`), ok, want{"runtimeConfig.commandOptions[0]", "kernel.core_pattern"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"safe sysctl", "podman", podman(`"--sysctl=net.ipv4.tcp_syncookies=1", ` + restrictedOpts), ok, ok, ok},
		{"--log-opt path", "podman", podman(`"--log-opt=path=/etc/x"`), ok, want{"runtimeConfig.commandOptions[0]", "host path"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"crun annotation", "podman", podman(`"--annotation", "run.oci.keep_original_groups=1"`), ok, want{"runtimeConfig.commandOptions[0]", "OCI runtime"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"plain annotation", "podman", podman(`"--annotation=app=web", ` + restrictedOpts), ok, ok, ok},
		// The option podman sees, not another.
		{"privileged as a value of --env", "podman", podman(`"--env", "--privileged", ` + restrictedOpts), ok, ok, ok},
		{"privileged as a value of -e", "podman", podman(`"-e", "--privileged", ` + restrictedOpts), ok, ok, ok},
		{"-e=--privileged", "podman", podman(`"-e=--privileged", ` + restrictedOpts), ok, ok, ok},
		{"-tie joined", "podman", podman(`"-tie--privileged", ` + restrictedOpts), ok, ok, ok},
		{"unknown option", "podman", podman(`"--no-such", "--privileged"`), ok, want{"runtimeConfig.commandOptions[0]", "--no-such is not an option"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"unknown short option", "podman", podman(`"-Z"`), ok, want{"runtimeConfig.commandOptions[0]", "-Z"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"a positional item", "podman", podman(`"alpine", "--privileged"`), ok, want{"runtimeConfig.commandOptions[0]", "takes it as the image"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--privileged false makes false the image", "podman", podman(`"--privileged", "false"`), ok, want{"runtimeConfig.commandOptions[0]", "every capability"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"--", "podman", podman(`"--"`), ok, want{"runtimeConfig.commandOptions[0]", "ends podman's options"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"a value taken from the agent's options", "podman", podman(`"--env"`), ok, want{"runtimeConfig.commandOptions[0]", "needs a value"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"bad flag syntax", "podman", podman(`"---privileged"`), ok, want{"runtimeConfig.commandOptions[0]", "not an option"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"the alias --net", "podman", podman(`"--net", "host"`), ok, want{"runtimeConfig.commandOptions[0]", "network"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"second option refused", "podman", podman(`"--rm", "-p", "80:80", "--privileged"`), ok, want{"runtimeConfig.commandOptions[3]", "every capability"}, want{"runtimeConfig.commandOptions[3]", ""}},
		// generalOptions
		{"--log-level", "podman", podmanGeneral(`"--log-level", "debug"`) + "\ncommandOptions: [" + restrictedOpts + "]", ok, ok, ok},
		{"--root", "podman", podmanGeneral(`"--root=/tmp/x"`), ok, want{"runtimeConfig.generalOptions[0]", "stores containers"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"--url", "podman", podmanGeneral(`"--url", "tcp://h:1"`), ok, want{"runtimeConfig.generalOptions[0]", "another podman"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"-r", "podman", podmanGeneral(`"-r"`), ok, want{"runtimeConfig.generalOptions[0]", "another podman"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"--runtime", "podman", podmanGeneral(`"--runtime", "/tmp/x"`), ok, want{"runtimeConfig.generalOptions[0]", "OCI runtime"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"--storage-opt", "podman", podmanGeneral(`"--storage-opt=x"`), ok, want{"runtimeConfig.generalOptions[0]", "storage"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"an unknown global option", "podman", podmanGeneral(`"--foo"`), ok, want{"runtimeConfig.generalOptions[0]", "--foo"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"a subcommand in generalOptions", "podman", podmanGeneral(`"system"`), ok, want{"runtimeConfig.generalOptions[0]", "subcommand"}, want{"runtimeConfig.generalOptions[0]", ""}},
		{"image from a host archive", "podman", "image: docker-archive:/root/x.tar", ok, want{"runtimeConfig.image", "from the host"}, want{"runtimeConfig.image", ""}},
		{"image from a registry with a port", "podman", "image: localhost:5000/img\ncommandOptions: [" + restrictedOpts + "]", ok, ok, ok},
		{"podman config not a mapping", "podman", "[a]", ok, want{"runtimeConfig", "expected a mapping"}, want{"runtimeConfig", ""}},
		{"commandOptions not a list", "podman", "image: img\ncommandOptions: --privileged", ok, want{"runtimeConfig.commandOptions", "list"}, want{"runtimeConfig.commandOptions", ""}},

		// podman-kube
		{"restricted pod", "podman-kube", kube(restrictedPod), ok, ok, ok},
		{"plain pod", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: app, image: img}]"), ok, ok, want{"runtimeConfig.manifest", "capabilities.drop"}},
		{"privileged container", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    securityContext: {privileged: true}"), ok, want{"runtimeConfig.manifest", "spec.containers[app].securityContext.privileged"}, want{"runtimeConfig.manifest", ""}},
		{"privileged: yes (YAML 1.1)", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    securityContext: {privileged: yes}"), ok, want{"runtimeConfig.manifest", "privileged"}, want{"runtimeConfig.manifest", ""}},
		{"hostPath", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  volumes: [{name: root, hostPath: {path: /}}]\n  containers: [{name: app}]"), ok, want{"runtimeConfig.manifest", "hostPath"}, want{"runtimeConfig.manifest", ""}},
		{"hostNetwork", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  hostNetwork: true\n  containers: [{name: app}]"), ok, want{"runtimeConfig.manifest", "hostNetwork"}, want{"runtimeConfig.manifest", ""}},
		{"hostPID in a Deployment", "podman-kube", kube("kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      hostPID: true\n      containers: [{name: app}]"), ok, want{"runtimeConfig.manifest", "hostPID"}, want{"runtimeConfig.manifest", ""}},
		{"hostIPC", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  hostIPC: true"), ok, want{"runtimeConfig.manifest", "hostIPC"}, want{"runtimeConfig.manifest", ""}},
		{"capabilities.add", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    securityContext: {capabilities: {add: [SYS_ADMIN]}}"), ok, want{"runtimeConfig.manifest", "SYS_ADMIN"}, want{"runtimeConfig.manifest", ""}},
		{"runAsUser 0", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  securityContext: {runAsUser: 0}\n  containers: [{name: app}]"), ok, ok, want{"runtimeConfig.manifest", "runAsUser"}},
		{"initContainer privileged", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  initContainers:\n  - name: init\n    securityContext: {privileged: true}"), ok, want{"runtimeConfig.manifest", "initContainers[init]"}, want{"runtimeConfig.manifest", ""}},
		{"procMount Unmasked", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    securityContext: {procMount: Unmasked}"), ok, want{"runtimeConfig.manifest", "procMount"}, want{"runtimeConfig.manifest", ""}},
		{"seccomp Unconfined", "podman-kube", kube("kind: Pod\nmetadata: {name: web}\nspec:\n  securityContext: {seccompProfile: {type: Unconfined}}"), ok, want{"runtimeConfig.manifest", "seccomp"}, want{"runtimeConfig.manifest", ""}},
		{"podman annotation", "podman-kube", kube("kind: Pod\nmetadata:\n  name: web\n  annotations: {io.podman.annotations.label/app: disable}\nspec: {containers: [{name: app}]}"), ok, want{"runtimeConfig.manifest", "io.podman.annotations.label"}, want{"runtimeConfig.manifest", ""}},
		{"PVC from a host device", "podman-kube", kube("kind: PersistentVolumeClaim\nmetadata:\n  name: v\n  annotations: {volume.podman.io/device: /dev/sda}"), ok, want{"runtimeConfig.manifest", "volume.podman.io/device"}, want{"runtimeConfig.manifest", ""}},
		{"unknown kind", "podman-kube", kube("kind: CustomThing\nmetadata: {name: x}"), ok, want{"runtimeConfig.manifest", "CustomThing"}, want{"runtimeConfig.manifest", ""}},
		{"manifest not YAML", "podman-kube", "manifest: \"a: [\"", ok, want{"runtimeConfig.manifest", "not valid YAML"}, want{"runtimeConfig.manifest", ""}},
		{"playOptions --configmap", "podman-kube", "playOptions: [--configmap, /root/secret.yaml]\n" + kube(restrictedPod), ok, want{"runtimeConfig.playOptions[0]", "host file"}, want{"runtimeConfig.playOptions[0]", ""}},
		{"playOptions --network host", "podman-kube", "playOptions: [--network=host]\n" + kube(restrictedPod), ok, want{"runtimeConfig.playOptions[0]", "host's network"}, want{"runtimeConfig.playOptions[0]", ""}},
		{"playOptions harmless", "podman-kube", "playOptions: [--replace, --log-driver, k8s-file]\n" + kube(restrictedPod), ok, ok, ok},
		{"downOptions unknown", "podman-kube", "downOptions: [--bar]\n" + kube(restrictedPod), ok, want{"runtimeConfig.downOptions[0]", "--bar"}, want{"runtimeConfig.downOptions[0]", ""}},
		{"kube generalOptions", "podman-kube", "generalOptions: [--hooks-dir, /tmp]\n" + kube(restrictedPod), ok, want{"runtimeConfig.generalOptions[0]", "hooks"}, want{"runtimeConfig.generalOptions[0]", ""}},

		// containerd: its commandOptions read with podman's table
		{"plain containerd", "containerd", podman(`"--env", "A=1", "--read-only"`), ok, ok, want{"runtimeConfig.commandOptions", "--cap-drop=ALL"}},
		{"containerd never restricted", "containerd", podman(`"--cap-drop=ALL"`), ok, ok, want{"runtimeConfig.commandOptions", "does not judge for nerdctl's --user yet"}},
		{"containerd --privileged", "containerd", podman(`"--privileged"`), ok, want{"runtimeConfig.commandOptions[0]", "every capability"}, want{"runtimeConfig.commandOptions[0]", "every capability"}},
		{"containerd host network", "containerd", podman(`"--net", "host"`), ok, want{"runtimeConfig.commandOptions[0]", "network"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"containerd host root", "containerd", podman(`"-v", "/:/host"`), ok, want{"runtimeConfig.commandOptions[0]", `host path "/"`}, want{"runtimeConfig.commandOptions[0]", "host path"}},
		{"containerd cap-add", "containerd", podman(`"--cap-add", "SYS_ADMIN"`), ok, want{"runtimeConfig.commandOptions[0]", "SYS_ADMIN"}, want{"runtimeConfig.commandOptions[0]", ""}},
		{"containerd generalOptions", "containerd", podmanGeneral(`"--namespace", "k8s.io"`), ok, want{"runtimeConfig.generalOptions[0]", "nerdctl's global options"}, want{"runtimeConfig.generalOptions[0]", ""}},

		// other runtimes: nothing to read
		{"unknown runtime", "wasm", "anything: [", ok, ok, ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, lv := range []struct {
				level Level
				want  want
			}{{Privileged, tt.privileged}, {Baseline, tt.baseline}, {Restricted, tt.restricted}} {
				err := Policy{Level: lv.level}.Check("", tt.runtime, tt.config)
				if lv.want == ok {
					if err != nil {
						t.Errorf("%s: refused: %v", lv.level, err)
					}
					continue
				}
				var r *Refusal
				if !errors.As(err, &r) {
					t.Errorf("%s: admitted, want a refusal of %s", lv.level, lv.want.field)
					continue
				}
				if r.Path != lv.want.field || !strings.Contains(r.Reason, lv.want.reason) || r.Level != lv.level {
					t.Errorf("%s: refusal %q (field %q), want field %q and %q in the reason", lv.level, err, r.Path, lv.want.field, lv.want.reason)
				}
				if !strings.Contains(err.Error(), lv.level.String()) {
					t.Errorf("%s: refusal %q does not name the level", lv.level, err)
				}
			}
		})
	}
}

// A refusal names the field under the workload's path and the levels,
// and is a state.FieldError (ErrInvalid) for the server's dry-run.
func TestRefusalIsAFieldError(t *testing.T) {
	err := Policy{Level: Baseline, Owner: "agent 'agent_A' (--workload-policy)"}.Check("desiredState.workloads.evil", "podman", podman(`"--rm", "--privileged"`))
	want := "desiredState.workloads.evil.runtimeConfig.commandOptions[1]: \"--privileged\" gives the container every capability and the host's devices, without confinement; that needs the workload policy privileged, and agent 'agent_A' (--workload-policy) is baseline"
	if err == nil || err.Error() != want {
		t.Fatalf("refusal\n %v\nwant\n %s", err, want)
	}
	var fe *state.FieldError
	if !errors.As(err, &fe) || fe.Path != "desiredState.workloads.evil.runtimeConfig.commandOptions[1]" || !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("%v is not a FieldError of the field (%+v)", err, fe)
	}
}

// No container may run as a uid of the agent's workload range, at any
// level: each belongs to one process workload.
func TestUIDRangeBelongsToProcessWorkloads(t *testing.T) {
	rng := UIDRange{First: 60000, Last: 60999}
	for _, tc := range []struct {
		runtime, config string
		refused         bool
	}{
		{"podman", podman(`"--user=60001"`), true},
		{"podman", podman(`"-u", "60999:60999"`), true},
		{"podman", podman(`"--user=61000"`), false},
		{"podman", podman(`"--user=1000"`), false},
		{"podman-kube", kube("kind: Pod\nmetadata: {name: p}\nspec:\n  securityContext: {runAsUser: 60500}"), true},
		{"podman-kube", kube("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    securityContext: {runAsUser: 0xEC60}"), true}, // 60512
	} {
		for _, lv := range []Level{Privileged, Baseline} {
			err := Policy{Level: lv, UIDs: rng}.Check("", tc.runtime, tc.config)
			if got := err != nil && strings.Contains(err.Error(), "workload uid range"); got != tc.refused {
				t.Errorf("%s %s at %s: %v, want refused %v", tc.runtime, tc.config, lv, err, tc.refused)
			}
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, l := range Levels {
		if got, err := ParseLevel(strings.ToUpper(l.String())); err != nil || got != l {
			t.Errorf("ParseLevel(%s) = %v, %v", l, got, err)
		}
	}
	if _, err := ParseLevel("root"); err == nil || !strings.Contains(err.Error(), "privileged, baseline or restricted") {
		t.Errorf("ParseLevel(root) = %v", err)
	}
	if !Privileged.Admits(Baseline) || Baseline.Admits(Privileged) || Restricted.Admits(Baseline) || !Baseline.Admits(Restricted) {
		t.Error("Admits orders the levels wrongly")
	}
}

// The flag reader reads as pflag: the value of a value option is the
// next item whatever it looks like, a bool option never takes one, and
// short options combine.
func TestReadFlagsAsPflag(t *testing.T) {
	tests := []struct {
		items []string
		want  []string // long=value per occurrence
		stop  int      // index of the stop, -1 none
	}{
		{[]string{"--env", "--privileged"}, []string{"env=--privileged"}, -1},
		{[]string{"-itv", "/:/h"}, []string{"interactive=true", "tty=true", "volume=/:/h"}, -1},
		{[]string{"-itv/:/h"}, []string{"interactive=true", "tty=true", "volume=/:/h"}, -1},
		{[]string{"-v=/x:/y"}, []string{"volume=/x:/y"}, -1},
		{[]string{"-t=false"}, []string{"tty=false"}, -1},
		{[]string{"-t="}, []string{"tty=true"}, 0},
		{[]string{"--privileged", "false"}, []string{"privileged=true"}, 1},
		{[]string{"--net=host"}, []string{"network=host"}, -1},
		{[]string{"--rm", "--", "--privileged"}, []string{"rm=true"}, 1},
		{[]string{"-"}, nil, 0},
		{[]string{"--volume"}, nil, 0},
		{[]string{"-e"}, nil, 0},
		{[]string{"--=x"}, nil, 0},
		{[]string{"-ep", "x"}, []string{"env=p"}, 1},
	}
	for _, tt := range tests {
		occs, st := readFlags(runOptions, "f", tt.items)
		var got []string
		for _, o := range occs {
			got = append(got, o.opt.long+"="+o.value)
		}
		stopAt := -1
		if st != nil {
			stopAt = st.index
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") || stopAt != tt.stop {
			t.Errorf("readFlags(%q) = %q stop %d, want %q stop %d", tt.items, got, stopAt, tt.want, tt.stop)
		}
	}
}

// What checking one workload costs: the agent checks every workload it
// starts, the server every workload an update renders anew.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct{ name, runtime, config string }{
		{"process", "process", "command: /usr/bin/app\nargs: [--port, '8080']\nenv: {A: '1', B: '2'}\nuser: app"},
		{"podman 12 options", "podman", podman(`"-p", "8080:80", "-e", "A=1", "-e", "B=2", "-v", "data:/data", "--cap-drop=ALL", "--user=1000", "--security-opt=no-new-privileges", "--memory=64m"`)},
		{"podman-kube", "podman-kube", kube(restrictedPod)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := Policy{Level: Restricted, UIDs: UIDRange{First: 60000, Last: 60999}}
			for b.Loop() {
				if err := p.Check("w", bc.runtime, bc.config); err != nil && bc.runtime != "process" {
					b.Fatal(err)
				}
			}
		})
	}
}
