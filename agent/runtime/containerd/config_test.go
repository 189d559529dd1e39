package containerd

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

func TestParseConfigTranslates(t *testing.T) {
	c, err := parseConfig(`image: alpine:3.20
commandOptions: ["-e", "A=1", "--env=B=2", "-w", "/srv", "--net", "host", "-v", "/h:/c:ro", "--mount", "type=bind,src=/a,dst=/b,readonly", "--cap-add", "net_admin", "--cap-drop=kill", "-l", "team=x", "-m", "64m", "--cpus", "0.5", "--privileged", "--read-only=false"]
commandArgs: [sleep, 5]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--env", "A=1", "--env", "B=2", "--cwd", "/srv", "--net-host",
		"--mount", "type=bind,src=/h,dst=/c,options=rbind:ro", "--mount", "type=bind,src=/a,dst=/b,options=rbind:ro",
		"--label", "team=x", "--memory-limit", "67108864", "--cpus", "0.5", "--privileged", "--cap-add", "CAP_NET_ADMIN", "--cap-drop", "CAP_KILL"}
	if !slices.Equal(c.RunOptions, want) {
		t.Errorf("RunOptions\n got %q\nwant %q", c.RunOptions, want)
	}
	if c.Image != "docker.io/library/alpine:3.20" || !slices.Equal(c.CommandArgs, []string{"sleep", "5"}) || !c.HostNetwork {
		t.Errorf("parsed %+v", c)
	}
}

// --cap-drop ALL drops every default capability but those added back,
// in whatever order the options come.
func TestCapDropAll(t *testing.T) {
	c, err := parseConfig("image: i\ncommandOptions: [--cap-add, net_bind_service, --cap-drop, ALL]")
	if err != nil {
		t.Fatal(err)
	}
	var drops []string
	for i, o := range c.RunOptions {
		if o == "--cap-drop" {
			drops = append(drops, c.RunOptions[i+1])
		}
	}
	if len(drops) != len(defaultCaps)-1 || slices.Contains(drops, "CAP_NET_BIND_SERVICE") || c.RunOptions[1] != "CAP_NET_BIND_SERVICE" {
		t.Fatalf("RunOptions %q: want every default capability dropped but NET_BIND_SERVICE, added", c.RunOptions)
	}
	if err := (&Runtime{}).Check("image: i\ncommandOptions: [--cap-add, ALL]"); err == nil {
		t.Fatal("--cap-add ALL admitted")
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
		{"image: i\ngeneralOptions: [--namespace, x]", "runtimeConfig.generalOptions[0]", "takes no generalOptions"},
		{"image: i\ncommandOptions: [--pid, host]", "runtimeConfig.commandOptions[0]", "not an option the containerd runtime supports"},
		{"image: i\ncommandOptions: [-u, '1000']", "runtimeConfig.commandOptions[0]", "not an option the containerd runtime supports"},
		{"image: i\ncommandOptions: [--name, x]", "runtimeConfig.commandOptions[0]", "the agent names the container"},
		{"image: i\ncommandOptions: [-e, A=1, -it]", "runtimeConfig.commandOptions[2]", "is not an option"},
		{"image: i\ncommandOptions: [--env]", "runtimeConfig.commandOptions[0]", "needs a value"},
		{"image: i\ncommandOptions: [--env, NAME]", "runtimeConfig.commandOptions[1]", "expected NAME=VALUE"},
		{"image: i\ncommandOptions: [--net, bridge]", "runtimeConfig.commandOptions[1]", "supports host and none"},
		{"image: i\ncommandOptions: [-v, 'vol:/data']", "runtimeConfig.commandOptions[1]", "named volumes are not supported"},
		{"image: i\ncommandOptions: [--mount, 'type=volume,dst=/x']", "runtimeConfig.commandOptions[1]", "only type=bind"},
		{"image: i\ncommandOptions: [-l, name=x]", "runtimeConfig.commandOptions[1]", "the agent sets label name"},
		{"image: i\ncommandOptions: [-m, lots]", "runtimeConfig.commandOptions[1]", "expected a positive size"},
		{"image: i\ncommandOptions: [--privileged=maybe]", "runtimeConfig.commandOptions[0]", "expected true or false"},
		{"image: i\ncommandOptions: [image-name]", "runtimeConfig.commandOptions[0]", "is not an option"},
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
