package podman

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/state"
)

// fakePodman writes a stand-in for the podman binary; it needs no podman.
func fakePodman(t *testing.T, script string) *Runtime {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// When podman fails, its own message reaches the caller: in the error of
// Create, Delete, List and Logs, and as the additional info of
// Failed(Unknown) from State.
func TestPodmanFailureReported(t *testing.T) {
	ctx := context.Background()
	inst := state.InstanceName{WorkloadName: "w", ID: "1", AgentName: "a"}
	spec := runtime.Spec{Instance: inst, Workload: &state.Workload{RuntimeConfig: "image: img"}}
	const id = runtime.ID("c6014aecebc9")

	tests := []struct {
		name   string
		script string
		want   string // in every error and in State's additional info
	}{
		{"podman fails", `echo "Error: simulated failure of $1" >&2; exit 125`, "exit status 125: Error: simulated failure of "},
		{"podman prints no JSON", `echo 'Error: not json'`, "cannot parse its output"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakePodman(t, tt.script)
			st, err := r.State(ctx, id)
			if err != nil || !st.Is(state.StateFailed, state.SubUnknown) || !strings.Contains(st.AdditionalInfo, tt.want) {
				t.Errorf("State = %v, %v; want Failed(Unknown) saying %q", st, err, tt.want)
			}
			if _, err := r.Create(ctx, spec); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Create error %v, want it to say %q", err, tt.want)
			}
			if _, err := r.List(ctx, "a"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("List error %v, want it to say %q", err, tt.want)
			}
			if _, err := r.Logs(ctx, id, runtime.LogOptions{Tail: -1}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Logs error %v, want it to say %q", err, tt.want)
			}
			_, err = r.ContainerID(ctx, inst)
			if err == nil || errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ContainerID error %v, want it to say %q and not ErrNotFound", err, tt.want)
			}
		})
	}

	t.Run("delete and info", func(t *testing.T) {
		r := fakePodman(t, `echo "Error: cannot stop" >&2; exit 125`)
		if Available(r.binary) {
			t.Fatal("Available: true for a podman whose info fails")
		}
		if err := r.Delete(ctx, id); err == nil || err.Error() != "podman stop: exit status 125: Error: cannot stop" {
			t.Fatalf("Delete error %v", err)
		}
	})

	t.Run("cancelled state", func(t *testing.T) {
		r := fakePodman(t, `sleep 1`)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.State(cctx, id); !errors.Is(err, context.Canceled) {
			t.Fatalf("State with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

func TestLoggedArgsHideEnvironmentValues(t *testing.T) {
	args := []string{"--remote", "ps", "-e", "PW=hunter2", "--env", "TOKEN=abc", "--env=KEY=v=1", "-e=X=y", "-eZ=w", "-e", "HOST_VAR", "PW=visible-arg"}
	got := strings.Join(loggedArgs(args), " ")
	want := "ps -e PW=*** --env TOKEN=*** --env=KEY=*** -e=X=*** -eZ=*** -e HOST_VAR PW=visible-arg (1 general options of the runtimeConfig not logged)"
	if got != want {
		t.Fatalf("loggedArgs = %q, want %q", got, want)
	}
	if args[3] != "PW=hunter2" {
		t.Fatal("loggedArgs changed the arguments podman gets")
	}
	run := []string{"--log-level=debug", "run", "--detach", "--name", "w.1.a", "-e", "PW=hunter2", "img", "--password", "hunter2"}
	if got, want := strings.Join(loggedArgs(run), " "), "run --name w.1.a (8 arguments of the runtimeConfig not logged)"; got != want {
		t.Fatalf("loggedArgs(run) = %q, want %q", got, want)
	}
}

// TestNoRenderedConfigInLogs: issue 17, point 5. Nothing of a rendered
// runtimeConfig — general options, --env values, command options, the
// command's arguments — reaches a log line, at debug level either.
func TestNoRenderedConfigInLogs(t *testing.T) {
	var buf syncbuf.Buffer
	bin := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nfor a; do case $a in ps) echo '[]'; exit 0;; rm) exit 0;; run) break;; esac; done\necho 'Error: simulated' >&2; exit 125\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Binary: bin, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	config := `image: img
generalOptions: ["--log-opt=tag=SECRET-1"]
commandOptions: ["-e", "PW=SECRET-2", "--env=TOKEN=SECRET-3", "-eK=SECRET-4", "--label", "x=SECRET-5"]
commandArgs: ["--password", "SECRET-6"]
`
	inst := state.InstanceName{WorkloadName: "w", ID: "1", AgentName: "a"}
	if _, err := r.Create(context.Background(), runtime.Spec{Instance: inst, Workload: &state.Workload{RuntimeConfig: config}}); err == nil {
		t.Fatal("Create succeeded with a podman that fails")
	}
	out := buf.String()
	if !strings.Contains(out, "run --name w.1.a") {
		t.Fatalf("the podman call is not logged at all:\n%s", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Fatalf("a rendered runtimeConfig value is in the log:\n%s", out)
	}
}
