package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/controlif"
	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// TestWorkloadCannotReachAnothersControlInterface replays the attack of
// issue 17 (point 5) with real processes under two uids: a workload with
// no control-interface rights wrote a Hello and an UpdateState into
// another workload's `output` FIFO, which the agent ran as that
// workload's request. Now the FIFOs are the victim's own (0600) in a
// directory only its group enters: the intruder's open fails with EACCES,
// as do its reads of the victim's record (the rendered environment) and
// working directory, while the victim opens its own FIFO.
func TestWorkloadCannotReachAnothersControlInterface(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs two workloads under uids of their own (setuid)")
	}
	runFolder, err := os.MkdirTemp("", "grapnel-isolation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runFolder) })
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := Config{Name: "agent_A", RunFolder: runFolder, WorkloadUIDs: process.UIDRange{First: 61200, Last: 61299}}
	if err := secureRunFolder(cfg, log); err != nil {
		t.Fatal(err)
	}
	rt, err := process.New(process.Config{RunFolder: runFolder, UIDs: cfg.WorkloadUIDs, Logger: log, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctl := controlif.New(controlif.Config{Agent: "agent_A", RunFolder: runFolder, Logger: log})
	t.Cleanup(ctl.Shutdown)
	access := state.ControlInterfaceAccess{AllowRules: []state.AccessRule{{Operation: state.RWRead, FilterMasks: []string{"desiredState"}}}}

	start := func(name, script string, ci bool) (runtime.Spec, runtime.ID, *runtime.Owner) {
		t.Helper()
		w := &state.Workload{Agent: "agent_A", Runtime: "process",
			RuntimeConfig: "command: sh\nargs: ['-c', '" + script + "']\nenv: {SECRET: " + name + "-s3cret}"}
		inst := state.NewInstanceName(name, "agent_A", w.RuntimeConfig)
		owner, err := rt.Owner(inst, w)
		if err != nil || owner == nil {
			t.Fatalf("Owner(%s): %v, %v", name, owner, err)
		}
		runDir := filepath.Join(runFolder, "agent_A_io", inst.String())
		if err := runtime.PrepareRunDir(runDir, owner); err != nil {
			t.Fatal(err)
		}
		s := runtime.Spec{Instance: inst, Workload: w, RunDir: runDir}
		if ci {
			if s.ControlInterface, err = ctl.Open(inst, access, owner); err != nil {
				t.Fatal(err)
			}
		}
		id, err := rt.Create(context.Background(), s)
		if err != nil {
			t.Fatalf("Create(%s): %v", name, err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), id) })
		return s, id, owner
	}
	victim, vid, vowner := start("victim", `exec 3>"$ANKAIOS_CONTROL_INTERFACE/output" && echo own-fifo-opened; exec sleep 60`, true)
	waitLogLine(t, rt, vid, "own-fifo-opened")

	targets := []string{
		filepath.Join(victim.ControlInterface, "output"),
		filepath.Join(victim.RunDir, "process", "spec.json"),
		filepath.Join(victim.RunDir, "work", "probe"),
	}
	var probe strings.Builder
	for _, f := range targets {
		probe.WriteString(`if (exec 3>>"` + f + `") 2>/dev/null; then echo "OPENED ` + f + `"; else echo "refused ` + f + `"; fi; `)
	}
	probe.WriteString(`ls "` + victim.ControlInterface + `" >/dev/null 2>&1 && echo LISTED || echo "refused listing"; echo done`)
	_, iid, iowner := start("intruder", probe.String(), false)
	if iowner.UID == vowner.UID {
		t.Fatalf("both workloads run as uid %d", vowner.UID)
	}
	out := waitLogLine(t, rt, iid, "done")
	if strings.Contains(out, "OPENED") || strings.Contains(out, "LISTED") {
		t.Fatalf("the intruder (uid %d) reached the victim's (uid %d) files:\n%s", iowner.UID, vowner.UID, out)
	}
	for _, f := range targets {
		if !strings.Contains(out, "refused "+f) {
			t.Fatalf("no refusal of %s in:\n%s", f, out)
		}
	}
	// And the error is the permission check, not a missing file.
	f := filepath.Join(victim.ControlInterface, "output")
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
	}
}

// waitLogLine waits until the instance's output holds line and returns it.
func waitLogLine(t *testing.T, rt *process.Runtime, id runtime.ID, line string) string {
	t.Helper()
	var out string
	testwait.For(t, 10*time.Second, func() bool {
		rc, err := rt.Logs(context.Background(), id, runtime.LogOptions{Tail: -1})
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		out = string(b)
		return strings.Contains(out, line)
	}, "%q in the output of %s (it is %q)", line, id, testwait.Lazy(func() string { return out }))
	return out
}

// TestRunFolderModes: the run folder and <agent>_io get their modes at
// every start whatever they were (0700; 0711 when workloads run under
// uids of their own), and a run folder another user owns is refused.
func TestRunFolderModes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name string
		uids process.UIDRange
		want os.FileMode
	}{
		{"workloads as the agent's user", process.UIDRange{}, 0o700},
		{"workloads under uids of their own", process.UIDRange{First: 61400, Last: 61401}, 0o711},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.uids.IsZero() && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			top, err := os.MkdirTemp("", "grapnel-runfolder-") // t.TempDir's parent lets nobody pass
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(top) })
			os.Chmod(top, 0o711)
			run := filepath.Join(top, "run")
			if err := os.MkdirAll(filepath.Join(run, "agent_A_io"), 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(run, 0o777)
			cfg := Config{Name: "agent_A", RunFolder: run, WorkloadUIDs: tt.uids}
			if err := secureRunFolder(cfg, log); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{run, filepath.Join(run, "agent_A_io")} {
				if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != tt.want {
					t.Fatalf("%s: %v %v, want %v", d, fi.Mode(), err, tt.want)
				}
			}
		})
	}
	t.Run("a parent workloads cannot pass", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		run := filepath.Join(t.TempDir(), "run") // its parent is 0700
		err := secureRunFolder(Config{Name: "agent_A", RunFolder: run, WorkloadUIDs: process.UIDRange{First: 61403, Last: 61404}}, log)
		if err == nil || !strings.Contains(err.Error(), "does not let other users pass") {
			t.Fatalf("a run folder under a 0700 directory: %v", err)
		}
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to make a folder of another user")
		}
		run := filepath.Join(t.TempDir(), "run")
		if err := os.Mkdir(run, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(run, 61402, 61402); err != nil {
			t.Fatal(err)
		}
		err := secureRunFolder(Config{Name: "agent_A", RunFolder: run}, log)
		if err == nil || !strings.Contains(err.Error(), "is owned by uid 61402") {
			t.Fatalf("a run folder of uid 61402: %v", err)
		}
	})
}
