package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
)

// The shim sets the runtime's variables without importing package
// runtime (which would make its binary larger).
func TestShimEnvNames(t *testing.T) {
	if shim.ControlInterfaceEnv != runtime.ControlInterfaceEnv || shim.FilesEnv != runtime.FilesEnv {
		t.Fatalf("shim: %s, %s; runtime: %s, %s",
			shim.ControlInterfaceEnv, shim.FilesEnv, runtime.ControlInterfaceEnv, runtime.FilesEnv)
	}
}

// A stand-in agent installed as <dir>/grapnel-agent starts its workload
// through <dir>/grapnel-process-shim when that is an executable, through
// itself when there is none or it is not executable, and through
// Config.Shim when that is set. Both executables are this test binary,
// whose TestMain runs the shim; /proc/<shim>/exe tells which one runs.
//
// Not parallel: the binaries are written while no other test of this
// package starts processes, which could inherit a file open for writing
// and make exec fail with ETXTBSY.
func TestShimNextToAgent(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		sibling string // "exe", "plain" (not executable) or "" (none)
		config  bool   // Config.Shim is the agent's executable
		want    string // the file the shim runs
	}{
		{name: "sibling", sibling: "exe", want: ShimCommand},
		{name: "no sibling", want: "grapnel-agent"},
		{name: "sibling not executable", sibling: "plain", want: "grapnel-agent"},
		{name: "Config.Shim", sibling: "exe", config: true, want: "grapnel-agent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			agentExe := filepath.Join(bin, "grapnel-agent")
			linkOrCopy(t, self, agentExe)
			switch tt.sibling {
			case "exe":
				linkOrCopy(t, self, filepath.Join(bin, ShimCommand))
			case "plain":
				if err := os.WriteFile(filepath.Join(bin, ShimCommand), []byte("#!/bin/sh\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			runFolder := t.TempDir()
			agent := exec.Command(agentExe)
			agent.Env = append(os.Environ(), testAgentEnv+"="+runFolder)
			if tt.config {
				agent.Env = append(agent.Env, testAgentShimEnv+"="+agentExe)
			}
			agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var logs bytes.Buffer
			agent.Stderr = &logs
			out, err := agent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := agent.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			mustKill(t, -agent.Process.Pid, syscall.SIGKILL)
			agent.Wait()
			if err != nil {
				t.Fatalf("stand-in agent: %v\n%s", err, logs.String())
			}
			id := runtime.ID(strings.Fields(line)[0])
			h := newHarness(t, Config{RunFolder: runFolder})
			t.Cleanup(func() {
				if err := h.rt.Delete(context.Background(), id); err != nil {
					t.Errorf("Delete: %v", err)
				}
			})

			want := filepath.Join(bin, tt.want)
			shimPID := h.records(id).shim.PID
			if got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", shimPID)); err != nil || got != want {
				t.Errorf("shim %d runs %q (%v), want %q", shimPID, got, err, want)
			}
			if !strings.Contains(logs.String(), "shim="+want+"\n") {
				t.Errorf("the agent did not log shim=%s:\n%s", want, logs.String())
			}
			if tt.sibling == "plain" && !strings.Contains(logs.String(), "not executable") {
				t.Errorf("the agent did not warn of the sibling that is not executable:\n%s", logs.String())
			}
		})
	}
}

// linkOrCopy puts the executable src at dst: a hard link, or a copy
// where the two are on different file systems.
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	err := os.Link(src, dst)
	if err == nil {
		return
	}
	if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, syscall.EPERM) {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
