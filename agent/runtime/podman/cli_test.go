package podman

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
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
	args := []string{"run", "-e", "PW=hunter2", "--env", "TOKEN=abc", "--env=KEY=v=1", "-e=X=y", "-e", "HOST_VAR", "img", "PW=visible-arg"}
	got := strings.Join(loggedArgs(args), " ")
	want := "run -e PW=*** --env TOKEN=*** --env=KEY=*** -e=X=*** -e HOST_VAR img PW=visible-arg"
	if got != want {
		t.Fatalf("loggedArgs = %q, want %q", got, want)
	}
	if args[2] != "PW=hunter2" {
		t.Fatal("loggedArgs changed the arguments podman gets")
	}
}
