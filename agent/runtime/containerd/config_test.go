package containerd

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// commandOptions and generalOptions reach nerdctl as written, in the
// forms its flag parser reads.
func TestParseConfigPassesOptions(t *testing.T) {
	general := []string{"--snapshotter", "native", "--debug", "--cgroup-manager=cgroupfs"}
	command := []string{"-e", "A=1", "--env=B=2", "-w", "/srv", "--net", "host", "-v", "/h:/c:ro", "--mount", "type=bind,src=/a,dst=/b,readonly",
		"--cap-add", "net_admin", "--cap-drop=kill", "-l", "team=x", "-m", "64m", "--cpus", "0.5", "--privileged", "--read-only=false",
		"-t=false", "-u", "1000", "-p8080:80", "--user=1:1", "-e", "--rm-is-a-value"}
	c, err := parseConfig("image: alpine:3.20\ngeneralOptions: " + yamlList(general) + "\ncommandOptions: " + yamlList(command) + "\ncommandArgs: [sleep, --rm, 5]")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.GeneralOptions, general) || !slices.Equal(c.CommandOptions, command) {
		t.Errorf("options\n got %q %q\nwant %q %q", c.GeneralOptions, c.CommandOptions, general, command)
	}
	if c.Image != "docker.io/library/alpine:3.20" || !slices.Equal(c.CommandArgs, []string{"sleep", "--rm", "5"}) {
		t.Errorf("parsed %+v", c)
	}
}

func yamlList(l []string) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// The `nerdctl run` line: the agent's options first, the workload's
// after them, the labels the agent owns last before the image, the
// command after it.
func TestRunArgs(t *testing.T) {
	s := runtime.Spec{Instance: state.NewInstanceName("w", "a1", "cfg"), RunDir: "/run/g/w",
		Mounts: []runtime.Mount{{HostPath: "/h/f", MountPoint: "/etc/f"}}, ControlInterface: "/run/g/ci"}
	c := runConfig{Image: "i:1", CommandOptions: []string{"-e", "A=1"}, CommandArgs: []string{"sh", "-c", "x"}}
	got, err := runArgs(c, s, "/bin/agent", "/run/g/w/containerd.log")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "--detach", "--name=", "--log-driver", "binary:///bin/agent?grapnel-containerd-log=%2Frun%2Fg%2Fw%2Fcontainerd.log", "--pull", "never",
		"-e", "A=1", "--mount", "type=bind,source=/h/f,target=/etc/f,readonly", "--mount", "type=bind,source=/run/g/ci,target=" + runtime.ContainerControlInterface,
		"--label", "name=" + s.Instance.String(), "--label", "agent=a1", "--label", "grapnel.log=/run/g/w/containerd.log", "i:1", "sh", "-c", "x"}
	if !slices.Equal(got, want) {
		t.Errorf("runArgs\n got %q\nwant %q", got, want)
	}
	s.Mounts[0].HostPath = "/h/a,b"
	if _, err := runArgs(c, s, "/bin/agent", "/l"); err == nil || !strings.Contains(err.Error(), "files[0]") {
		t.Errorf("a mount path with a comma: %v", err)
	}
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"alpine":                           "docker.io/library/alpine:latest",
		"alpine:3.20":                      "docker.io/library/alpine:3.20",
		"me/app":                           "docker.io/me/app:latest",
		"ghcr.io/me/app:1":                 "ghcr.io/me/app:1",
		"localhost/grapnel-busybox:latest": "localhost/grapnel-busybox:latest",
		"localhost:5000/app":               "localhost:5000/app:latest",
		"quay.io/a/b@sha256:0123":          "quay.io/a/b@sha256:0123",
	} {
		if got := normalizeImage(in); got != want {
			t.Errorf("normalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every refusal names the field and the reason, and wraps ErrBadConfig.
func TestParseConfigRefuses(t *testing.T) {
	tests := []struct{ config, field, reason string }{
		{"commandArgs: [x]", "runtimeConfig.image", "required"},
		{"image: i\nfoo: 1", "runtimeConfig.foo", "unknown field"},
		{"image: i\ngeneralOptions: [--namespace, x]", "runtimeConfig.generalOptions[0]", "the agent chooses the containerd namespace"},
		{"image: i\ngeneralOptions: [-n=x]", "runtimeConfig.generalOptions[0]", "the agent chooses the containerd namespace"},
		{"image: i\ngeneralOptions: [--debug, -a, /s]", "runtimeConfig.generalOptions[1]", "containerd's socket"},
		{"image: i\ngeneralOptions: [--data-root=/x]", "runtimeConfig.generalOptions[0]", "nerdctl's data root"},
		{"image: i\ngeneralOptions: [--cni-netconfpath, /x]", "runtimeConfig.generalOptions[0]", "CNI configuration directory"},
		{"image: i\ngeneralOptions: [run]", "runtimeConfig.generalOptions[0]", "is not an option"},
		{"image: i\ngeneralOptions: [--no-such]", "runtimeConfig.generalOptions[0]", "not a nerdctl global option"},
		{"image: i\ngeneralOptions: [--snapshotter]", "runtimeConfig.generalOptions[0]", "needs a value"},
		{"image: i\ncommandOptions: [--no-such-option]", "runtimeConfig.commandOptions[0]", "not a nerdctl run option"},
		{"image: i\ncommandOptions: [--name, x]", "runtimeConfig.commandOptions[0]", "nerdctl keeps a name"},
		{"image: i\ncommandOptions: [--rm]", "runtimeConfig.commandOptions[0]", "removes the container"},
		{"image: i\ncommandOptions: [-e, A=1, -dit]", "runtimeConfig.commandOptions[2]", "detached"},
		{"image: i\ncommandOptions: [--detach=false]", "runtimeConfig.commandOptions[0]", "detached"},
		{"image: i\ncommandOptions: [--restart=always]", "runtimeConfig.commandOptions[0]", "restartPolicy"},
		{"image: i\ncommandOptions: [--log-driver, json-file]", "runtimeConfig.commandOptions[0]", "the agent's own logger"},
		{"image: i\ncommandOptions: [--log-opt=max-size=1m]", "runtimeConfig.commandOptions[0]", "the agent's own logger"},
		{"image: i\ncommandOptions: [--label-file, /f]", "runtimeConfig.commandOptions[0]", "labels the agent owns"},
		{"image: i\ncommandOptions: [-i]", "runtimeConfig.commandOptions[0]", "standard input"},
		{"image: i\ncommandOptions: [--env]", "runtimeConfig.commandOptions[0]", "needs a value"},
		{"image: i\ncommandOptions: [-l, name=x]", "runtimeConfig.commandOptions[1]", "the agent sets label name"},
		{"image: i\ncommandOptions: [-lagent=x]", "runtimeConfig.commandOptions[0]", "the agent sets label agent"},
		{"image: i\ncommandOptions: [--label=grapnel.exit=0]", "runtimeConfig.commandOptions[0]", "the agent sets label grapnel.exit"},
		{"image: i\ncommandOptions: [--label, nerdctl/log-uri=x]", "runtimeConfig.commandOptions[1]", "the agent sets label nerdctl/log-uri"},
		{"image: i\ncommandOptions: [--privileged=maybe]", "runtimeConfig.commandOptions[0]", "expected true or false"},
		{"image: i\ncommandOptions: [--privileged, alpine]", "runtimeConfig.commandOptions[1]", "is not an option"},
		{"image: i\ncommandOptions: [-e, A=1, --]", "runtimeConfig.commandOptions[2]", "is not an option"},
		{"image: i\ncommandOptions: [-x]", "runtimeConfig.commandOptions[0]", "-x is not a nerdctl run option"},
		{"image: -x", "runtimeConfig.image", "must not start with '-'"},
		{"image: i\ncommandArgs: x", "runtimeConfig.commandArgs", "expected a list of strings"},
	}
	for _, tt := range tests {
		err := (&Runtime{}).Check(tt.config)
		if !errors.Is(err, runtime.ErrBadConfig) || !strings.HasPrefix(err.Error(), tt.field+": ") || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("Check(%q) = %v, want %s: …%s…", tt.config, err, tt.field, tt.reason)
		}
	}
}

func TestParseTasks(t *testing.T) {
	got := parseTasks("TASK    PID    STATUS    \nabc     661    STOPPED\ndef     12     RUNNING\n")
	if len(got) != 2 || got["abc"] != "STOPPED" || got["def"] != "RUNNING" {
		t.Fatalf("parseTasks = %v", got)
	}
}

func TestExitState(t *testing.T) {
	if st, _ := exitState(map[string]string{labelExit: "0"}); st.State != "Succeeded" {
		t.Errorf("exit 0: %v", st)
	}
	if st, _ := exitState(map[string]string{labelExit: "137"}); st.AdditionalInfo != "exit code 137" || st.SubState != "ExecFailed" {
		t.Errorf("exit 137: %v", st)
	}
	if st, _ := exitState(nil); st.SubState != "Lost" {
		t.Errorf("no exit label: %v", st)
	}
	if m := exitWarning.FindStringSubmatch(`time="2026-11-28T19:25:56Z" level=warning msg="task abc exit with non-zero exit code 3"`); m == nil || m[1] != "3" {
		t.Errorf("exitWarning did not read ctr's warning: %v", m)
	}
}

// An agent on a host without containerd's socket must not wait for ctr's
// dial timeout to learn that containerd is not there.
func TestAvailableWithoutSocketAtOnce(t *testing.T) {
	if _, err := exec.LookPath("ctr"); err != nil {
		t.Skip("ctr not installed: nothing would wait")
	}
	start := time.Now()
	if Available(Config{Address: filepath.Join(t.TempDir(), "none.sock")}) {
		t.Fatal("Available without a socket")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Available took %v without a socket", took)
	}
}
