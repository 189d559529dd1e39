package podman

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// swdd~podman-create-workload-creates-labels~2
// swdd~podman-create-workload-mounts-fifo-files~1
// swdd~podman-create-workload-sets-optionally-container-name~2
func TestRunArgs(t *testing.T) {
	inst := state.InstanceName{WorkloadName: "nginx", ID: "abc", AgentName: "agent_A"}
	full := runConfig{
		GeneralOptions: []string{"--log-level=warn"},
		Image:          "img:1",
		CommandOptions: []string{"--env=A=1", "--name", "mine"},
		CommandArgs:    []string{"sleep", "5"},
	}
	tests := []struct {
		name string
		cfg  runConfig
		spec runtime.Spec
		want []string
	}{
		{
			name: "image only",
			cfg:  runConfig{Image: "img:1"},
			spec: runtime.Spec{Instance: inst},
			want: []string{"run", "--detach", "--name", "nginx.abc.agent_A",
				"--label", "name=nginx.abc.agent_A", "--label", "agent=agent_A", "img:1"},
		},
		{
			name: "options, files and control interface",
			cfg:  full,
			spec: runtime.Spec{
				Instance: inst,
				Mounts: []runtime.Mount{
					{HostPath: "/run/g/agent_A_io/x/files/etc/a.conf", MountPoint: "/etc/a.conf"},
					{HostPath: "/run/g/agent_A_io/x/files/b", MountPoint: "/b"},
				},
				ControlInterface: "/run/g/agent_A_io/x/control_interface",
			},
			want: []string{"--log-level=warn", "run", "--detach", "--name", "nginx.abc.agent_A",
				"--env=A=1", "--name", "mine",
				"--mount=type=bind,source=/run/g/agent_A_io/x/files/etc/a.conf,destination=/etc/a.conf,readonly=true",
				"--mount=type=bind,source=/run/g/agent_A_io/x/files/b,destination=/b,readonly=true",
				"--mount=type=bind,source=/run/g/agent_A_io/x/control_interface,destination=/run/ankaios/control_interface",
				"--label", "name=nginx.abc.agent_A", "--label", "agent=agent_A",
				"img:1", "sleep", "5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runArgs(tt.cfg, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("args\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestRunArgsRefusesCommas(t *testing.T) {
	inst := state.InstanceName{WorkloadName: "w", ID: "1", AgentName: "a"}
	tests := []struct {
		name string
		spec runtime.Spec
		want string
	}{
		{"mount point", runtime.Spec{Instance: inst, Mounts: []runtime.Mount{{HostPath: "/h/a", MountPoint: "/a"}, {HostPath: "/h/a,b", MountPoint: "/a,b"}}},
			"files[1]: /h/a,b: contains a comma"},
		{"control interface", runtime.Spec{Instance: inst, ControlInterface: "/run/x,y"}, "control interface: /run/x,y: contains a comma"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runArgs(runConfig{Image: "i"}, tt.spec)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want prefix %q", err, tt.want)
			}
			if !errors.Is(err, runtime.ErrBadConfig) {
				t.Fatalf("error %v does not wrap runtime.ErrBadConfig", err)
			}
		})
	}
}

// swdd~podman-log-fetching-collects-logs~1
func TestLogsArgs(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	until := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		o    runtime.LogOptions
		want []string
	}{
		{"all", runtime.LogOptions{Tail: -1}, []string{"logs", "cid"}},
		{"tail zero", runtime.LogOptions{Tail: 0}, []string{"logs", "--tail", "0", "cid"}},
		{"everything", runtime.LogOptions{Follow: true, Tail: 10, Since: since, Until: until},
			[]string{"logs", "--follow", "--tail", "10", "--since", "2026-01-02T02:04:05.0000006Z", "--until", "2026-01-02T04:00:00Z", "cid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logsArgs("cid", tt.o); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGraceSeconds(t *testing.T) {
	tests := []struct {
		grace time.Duration
		want  string
	}{
		{0, "0"},
		{time.Second, "1"},
		{1500 * time.Millisecond, "2"},
		{DefaultStopGrace, "10"},
	}
	for _, tt := range tests {
		if got := (&Runtime{grace: tt.grace}).graceSeconds(); got != tt.want {
			t.Errorf("graceSeconds(%v) = %s, want %s", tt.grace, got, tt.want)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"c6014aecebc9fc934895e3c63ad08ce76010adf52dca3122a77462df68c93497", true},
		{"nginx.abc.agent_A", true},
		{"", false},
		{"-t", false},
		{"a b", false},
		{"a;b", false},
	}
	for _, tt := range tests {
		if got := validID(tt.id); got != tt.want {
			t.Errorf("validID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestSubcommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "debug", "run", "--detach"}, "run"},
		{[]string{"ps", "--all"}, "ps"},
		// Nothing unknown is echoed: it could come from a runtimeConfig.
		{[]string{"--log-opt=tag=secret"}, "(no known subcommand)"},
	}
	for _, tt := range tests {
		if got := subcommand(tt.args); got != tt.want {
			t.Errorf("subcommand(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
