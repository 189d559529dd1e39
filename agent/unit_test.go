package agent

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestCPUPercent(t *testing.T) {
	if p := cpuPercent(cpuSample{work: 10, total: 100}, cpuSample{work: 60, total: 200}); p != 50 {
		t.Fatalf("cpu %d%%", p)
	}
	if p := cpuPercent(cpuSample{total: 5}, cpuSample{total: 5}); p != 0 {
		t.Fatalf("no time passed gives %d%%", p)
	}
	if _, ok := readCPU(); !ok {
		t.Skip("/proc/stat not readable")
	}
	if freeMemory() == 0 {
		t.Fatal("MemAvailable not read")
	}
}

// The incarnation grows with every start, also when the counter file is
// lost or damaged, and is written before it is used.
func TestNextIncarnation(t *testing.T) {
	epoch := time.Unix(1_000, 0)
	tests := []struct {
		name    string
		content *string // nil: no file
		now     time.Time
		want    uint64
	}{
		{"first start takes the clock in milliseconds", nil, epoch, 1_000_000},
		{"a lost counter a few milliseconds later differs", nil, epoch.Add(7 * time.Millisecond), 1_000_007},
		{"counter ahead of the clock grows by one", ptr("5000000\n"), epoch, 5_000_001},
		{"clock ahead of the counter wins", ptr("7"), epoch, 1_000_000},
		{"a count of seconds from an older agent is overtaken", ptr("1000"), epoch, 1_000_000},
		{"damaged file starts from the clock", ptr("garbage"), epoch, 1_000_000},
		{"a clock before 1970 leaves the counter", ptr("41"), time.Unix(-5, 0), 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := incarnationPath(t.TempDir(), "agent_A")
			if tt.content != nil {
				if err := os.WriteFile(path, []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := nextIncarnation(path, tt.now, quiet)
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
			data, err := os.ReadFile(path)
			if err != nil || strings.TrimSpace(string(data)) != strconv.FormatUint(tt.want, 10) {
				t.Fatalf("file holds %q, %v", data, err)
			}
			again, err := nextIncarnation(path, tt.now, quiet)
			if err != nil || again != got+1 {
				t.Fatalf("second start in the same second: %d, %v; want %d", again, err, got+1)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp*")); len(left) > 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
	if _, err := nextIncarnation(filepath.Join(t.TempDir(), "missing", "a.incarnation"), epoch, quiet); err == nil ||
		!strings.Contains(err.Error(), "incarnation file") {
		t.Fatalf("an unwritable counter gives %v", err)
	}
}

func ptr(s string) *string { return &s }

// The outbox keeps the newest state per instance; what a failed send or a
// reconnect puts back never hides a newer report.
func TestOutbox(t *testing.T) {
	a := state.NewInstanceName("a", "agent_A", "1")
	b := state.NewInstanceName("b", "agent_A", "1")
	running := state.ExecutionState{State: state.StateRunning, SubState: state.SubOk}
	starting := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	succeeded := state.ExecutionState{State: state.StateSucceeded, SubState: state.SubOk}
	o := newOutbox()
	if o.take() != nil {
		t.Fatal("an empty outbox gave states")
	}
	o.put([]state.WorkloadState{{Instance: b, State: starting}, {Instance: a, State: starting}})
	o.put([]state.WorkloadState{{Instance: b, State: running}})
	select {
	case <-o.wake:
	default:
		t.Fatal("put did not wake the sender")
	}
	o.putMissing([]state.WorkloadState{{Instance: b, State: succeeded}})
	got := o.take()
	want := []state.WorkloadState{{Instance: a, State: starting}, {Instance: b, State: running}}
	if !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v (newest per instance, ordered)", got, want)
	}
	if o.size() != 0 {
		t.Fatal("take left states behind")
	}
	// A failed send puts back what it took; a report that came meanwhile
	// stays.
	o.put([]state.WorkloadState{{Instance: a, State: succeeded}})
	o.putBack(got)
	if got := o.take(); !slices.Equal(got, []state.WorkloadState{{Instance: a, State: succeeded}, {Instance: b, State: running}}) {
		t.Fatalf("after put back: %v", got)
	}
}

// A Removed, or an exit, is never overwritten by the same instance name
// starting again before it was sent: the CLI's and ank's wait lists end a
// deletion on Removed. A failed send puts it back ahead of newer states.
func TestOutboxKeepsEndedLives(t *testing.T) {
	a := state.NewInstanceName("a", "agent_A", "1")
	b := state.NewInstanceName("b", "agent_A", "1")
	stopping := state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping}
	removed := state.ExecutionState{State: state.StateRemoved, SubState: string(state.StateRemoved)}
	starting := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	running := state.ExecutionState{State: state.StateRunning, SubState: state.SubOk}
	failed := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}
	o := newOutbox()
	for _, s := range []state.ExecutionState{stopping, removed, starting} {
		o.put([]state.WorkloadState{{Instance: b, State: s}})
	}
	o.put([]state.WorkloadState{{Instance: a, State: running}, {Instance: a, State: failed}, {Instance: a, State: starting}})
	got := o.take()
	want := []state.WorkloadState{{Instance: a, State: failed}, {Instance: a, State: starting},
		{Instance: b, State: removed}, {Instance: b, State: starting}}
	if !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	o.put([]state.WorkloadState{{Instance: b, State: running}})
	o.putBack(got)
	want = []state.WorkloadState{{Instance: a, State: failed}, {Instance: a, State: starting},
		{Instance: b, State: removed}, {Instance: b, State: running}}
	if got := o.take(); !slices.Equal(got, want) {
		t.Fatalf("after put back: %v, want %v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Name: "agent_A", Servers: []string{"127.0.0.1:25551"}, Insecure: true}
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"good", func(c *Config) {}, ""},
		{"tls files", func(c *Config) { c.Insecure, c.TLS = false, rpc.TLSFiles{CA: "a", Cert: "b", Key: "c"} }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "name: required"},
		{"bad name", func(c *Config) { c.Name = "a b" }, `name "a b"`},
		{"no server", func(c *Config) { c.Servers = nil }, "servers"},
		{"server without port", func(c *Config) { c.Servers = []string{"host"} }, `servers[0] "host"`},
		{"no security mode", func(c *Config) { c.Insecure = false }, "tls"},
		{"unknown runtime", func(c *Config) { c.Runtimes = []string{"process", "docker"} }, `runtimes[1] "docker"`},
		{"runtime twice", func(c *Config) { c.Runtimes = []string{"process", "process"} }, "listed twice"},
		{"gossip join without port", func(c *Config) { c.GossipJoin = []string{"10.0.0.1:25571", "10.0.0.2"} }, `gossipJoin[1] "10.0.0.2"`},
		{"bad gossip address", func(c *Config) { c.GossipJoin, c.GossipAddress = []string{"a:1"}, "nowhere" }, "gossipAddress"},
		{"bad gossip key", func(c *Config) { c.GossipKey = make([]byte, 7) }, "gossipKey"},
		{"negative load interval", func(c *Config) { c.LoadInterval = -time.Second }, "loadInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.withDefaults().validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrConfig naming %q", err, tt.want)
			}
		})
	}
	d := good.withDefaults()
	if d.RunFolder != DefaultRunFolder() || d.LoadInterval != DefaultLoadInterval || d.GossipAddress != DefaultGossipAddress {
		t.Fatalf("defaults %+v", d)
	}
	if want := filepath.Join(os.TempDir(), "ankaios"); DefaultRunFolder() != want {
		t.Fatalf("DefaultRunFolder = %s, want %s as Ankaios", DefaultRunFolder(), want)
	}
}

// The leader is the replica that announces itself and that a majority of
// the alive replicas follow.
func TestViewOf(t *testing.T) {
	srv := func(leader, grpc string) gossipmeta.Meta {
		return gossipmeta.Meta{Role: gossipmeta.RoleServer, RaftAddress: "r", GRPCAddress: grpc, LeaderSeen: leader}
	}
	tests := []struct {
		name     string
		servers  map[string]gossipmeta.Meta
		leader   string
		wantAddr []string
	}{
		{"all agree", map[string]gossipmeta.Meta{"a": srv("b", "a:1"), "b": srv("b", "b:1"), "c": srv("b", "c:1")}, "b", []string{"a:1", "b:1", "c:1"}},
		{"dead leader not yet declared dead", map[string]gossipmeta.Meta{"a": srv("a", "a:1"), "b": srv("b", "b:1"), "c": srv("b", "c:1")}, "b", nil},
		{"no majority", map[string]gossipmeta.Meta{"a": srv("a", "a:1"), "b": srv("b", "b:1"), "c": srv("", "c:1")}, "", nil},
		{"followed but not claiming", map[string]gossipmeta.Meta{"a": srv("c", "a:1"), "b": srv("c", "b:1"), "c": srv("", "c:1")}, "", nil},
		{"leader without gRPC address", map[string]gossipmeta.Meta{"a": srv("a", ""), "b": srv("a", "b:1")}, "", []string{"b:1"}},
		{"none", nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewOf(tt.servers)
			if v.LeaderID != tt.leader {
				t.Fatalf("leader %q, want %q", v.LeaderID, tt.leader)
			}
			if tt.leader != "" && v.LeaderAddr != tt.servers[tt.leader].GRPCAddress {
				t.Fatalf("leader address %q", v.LeaderAddr)
			}
			if tt.wantAddr != nil && !slices.Equal(v.Addrs, tt.wantAddr) {
				t.Fatalf("addresses %v, want %v", v.Addrs, tt.wantAddr)
			}
		})
	}
}

// A workload the server sends that does not convert never reaches the
// Manager; it is reported Pending(StartingFailed) with the reason.
func TestAddedReportsWhatDoesNotConvert(t *testing.T) {
	c := &conn{log: quiet, out: newOutbox()}
	good := state.NewInstanceName("good", "agent_A", "1")
	bad := state.NewInstanceName("bad", "agent_A", "2")
	gp := rpc.AddedWorkloadToProto(good, &state.Workload{Agent: "agent_A", Runtime: "process", RuntimeConfig: "command: /bin/true"})
	bp := rpc.AddedWorkloadToProto(bad, &state.Workload{Agent: "agent_A", Runtime: "process"})
	bp.Workload.RuntimeConfig = nil
	added := c.added([]*grpcapi.AddedWorkload{gp, bp})
	if len(added) != 1 || added[0].Instance != good || added[0].Workload.Runtime != "process" {
		t.Fatalf("added %+v", added)
	}
	got := c.out.take()
	if len(got) != 1 || got[0].Instance != bad || !got[0].State.Is(state.StatePending, state.SubStartingFailed) ||
		!strings.Contains(got[0].State.AdditionalInfo, "runtimeConfig") {
		t.Fatalf("reported %+v", got)
	}
}

func TestDeletedFromProto(t *testing.T) {
	inst := state.NewInstanceName("w", "agent_A", "1")
	p := rpc.DeletedWorkloadToProto(inst, map[string]state.DeleteCondition{"x": state.DelCondRunning, "y": state.DelCondNotPendingNorRunning})
	p.Dependencies["z"] = grpcapi.DeleteCondition(99)
	got := deletedFromProto([]*grpcapi.DeletedWorkload{p})
	want := map[string]state.DeleteCondition{"x": state.DelCondRunning, "y": state.DelCondNotPendingNorRunning, "z": state.DelCondNotPendingNorRunning}
	if len(got) != 1 || got[0].Instance != inst || len(got[0].Dependencies) != 3 {
		t.Fatalf("got %+v", got)
	}
	for k, v := range want {
		if got[0].Dependencies[k] != v {
			t.Fatalf("dependency %s: %s, want %s", k, got[0].Dependencies[k], v)
		}
	}
}

// Podman (and podman-kube, which runs on it) is optional among the
// default runtimes and required when listed.
func TestOpenRuntimes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-podman")
	tests := []struct {
		name     string
		runtimes []string
		want     []string
		err      string
	}{
		{"default without podman", nil, []string{RuntimeProcess}, ""},
		{"process only", []string{RuntimeProcess}, []string{RuntimeProcess}, ""},
		{"podman listed but missing", []string{RuntimeProcess, RuntimePodman}, nil, "runtimes: podman is listed but podman is not available"},
		{"podman-kube listed but missing", []string{RuntimePodmanKube}, nil, "runtimes: podman-kube is listed but podman is not available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{RunFolder: t.TempDir(), Runtimes: tt.runtimes, PodmanBinary: missing}.withDefaults()
			cfg.Logger = quiet
			got, err := openRuntimes(cfg)
			if tt.err != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tt.want) {
				t.Fatalf("runtimes %v, want %v", names, tt.want)
			}
			for name, r := range got {
				if r.Name() != name {
					t.Fatalf("runtime %q is named %q", name, r.Name())
				}
			}
		})
	}
}
