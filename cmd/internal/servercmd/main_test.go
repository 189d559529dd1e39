package servercmd

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// swdd~server-fails-on-invalid-startup-state~1
// swdd~stored-workload-spec-parses-yaml~1
// swdd~stored-workload-spec-checks-unique-name~1
func TestStartupManifestValidation(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const privileged = "apiVersion: v1\nworkloads:\n  a: {runtime: podman, agent: x, runtimeConfig: 'image: i\n\ncommandOptions: [--privileged]'}\n"
	cases := []struct {
		name, yaml, wantErr string
		level               workloadpolicy.Level
	}{
		{"valid", "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: x\n    runtimeConfig: y\n", "", workloadpolicy.Baseline},
		{"legacy v0.1 accepted", "apiVersion: v0.1\nworkloads:\n  a:\n    runtime: podman\n    agent: x\n    tags: [{key: k, value: v}]\n    runtimeConfig: y\n", "", workloadpolicy.Baseline},
		{"not yaml", "apiVersion: [", "not valid YAML", workloadpolicy.Baseline},
		{"wrong version", "apiVersion: v9\n", "Unsupported API version", workloadpolicy.Baseline},
		{"duplicate name", "apiVersion: v1\nworkloads:\n  a: {runtime: p, agent: x, runtimeConfig: y}\n  a: {runtime: p, agent: x, runtimeConfig: z}\n", "already defined", workloadpolicy.Baseline},
		{"unknown field", "apiVersion: v1\nworkloads:\n  a: {runtime: p, agent: x, runtimeConfig: y, colour: red}\n", "colour", workloadpolicy.Baseline},
		{"cycle", "apiVersion: v1\nworkloads:\n  a: {runtime: p, agent: x, runtimeConfig: y, dependencies: {b: ADD_COND_RUNNING}}\n  b: {runtime: p, agent: x, runtimeConfig: y, dependencies: {a: ADD_COND_RUNNING}}\n", "cycle", workloadpolicy.Baseline},
		{"bad template", "apiVersion: v1\nworkloads:\n  a: {runtime: p, agent: x, runtimeConfig: '{{c.nope}}', configs: {c: k}}\nconfigs:\n  k: {v: '1'}\n", "runtimeConfig", workloadpolicy.Baseline},
		{"privileged container at baseline", privileged, "desiredState.workloads.a.runtimeConfig.commandOptions[0]: \"--privileged\"", workloadpolicy.Baseline},
		{"privileged container at privileged", privileged, "", workloadpolicy.Privileged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.yaml")
			os.WriteFile(p, []byte(c.yaml), 0o600)
			s, err := loadStartupManifest(p, state.DefaultLimits(), c.level, log)
			if c.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}

// The shipped server.yaml names no startup manifest (deploy/README.md):
// the replica starts with an empty desired state and says so; one that is
// named but missing stops it with the key and the path.
func TestStartupManifestOptional(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	s, err := loadStartupManifest("", state.DefaultLimits(), workloadpolicy.Baseline, log)
	if err != nil || s != nil {
		t.Fatalf("no manifest: state %v, error %v; want none and no error", s, err)
	}
	if !strings.Contains(buf.String(), "no startup manifest") {
		t.Fatalf("no manifest: log %q does not say so", buf.String())
	}
	missing := filepath.Join(t.TempDir(), "state.yaml")
	_, err = loadStartupManifest(missing, state.DefaultLimits(), workloadpolicy.Baseline, log)
	if err == nil || !strings.Contains(err.Error(), "startup_manifest") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing manifest: error %v, want one naming startup_manifest and %s", err, missing)
	}
}
