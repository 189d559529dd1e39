package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// bootFile writes a boot id file of the test's own: changing it between
// two Runtimes on one run folder is a reboot as the runtime sees it.
func bootFile(t *testing.T, id string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadBootID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
		ok               bool
	}{
		{"kernel", DefaultBootIDFile, "", true},
		{"trimmed", write("a", "6db300e4-ae11-4cc3-aee3-f3e33db26a35\n"), "6db300e4-ae11-4cc3-aee3-f3e33db26a35", true},
		{"empty", write("b", "\n"), "", false},
		{"two lines", write("c", "a\nb\n"), "", false},
		{"missing", filepath.Join(dir, "none"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readBootID(tt.path)
			if (err == nil) != tt.ok {
				t.Fatalf("readBootID(%s) = %q, %v; want ok=%v", tt.path, got, err, tt.ok)
			}
			if tt.want != "" && got != tt.want {
				t.Fatalf("readBootID = %q, want %q", got, tt.want)
			}
			if tt.name == "kernel" && len(got) != 36 {
				t.Fatalf("the kernel's boot id %q is not a UUID", got)
			}
		})
	}
}

func TestSameBoot(t *testing.T) {
	tests := []struct {
		recorded, now string
		want          bool
	}{
		{"b1", "b1", true},
		{"b1", "b2", false},
		{"", "b2", true}, // a record from before boot ids: start times decide
		{"b1", "", true}, // no boot id now: start times decide
	}
	for _, tt := range tests {
		if got := sameBoot(tt.recorded, tt.now); got != tt.want {
			t.Errorf("sameBoot(%q, %q) = %v, want %v", tt.recorded, tt.now, got, tt.want)
		}
	}
}

// powerLoss kills the shim, then the workload, with SIGKILL: nothing is
// left to record the exit, as when the power goes.
func powerLoss(t *testing.T, rs records) {
	t.Helper()
	mustKill(t, rs.shim.PID, syscall.SIGKILL)
	waitGone(t, rs.shim.PID)
	mustKill(t, rs.child.PID, syscall.SIGKILL)
	waitGone(t, rs.child.PID)
}

// startBystander starts an unrelated process of the same uid: the
// process that holds a recorded pid after a reboot.
func startBystander(t *testing.T) (pid int, start uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, start
}

// A second Runtime on the same run folder is the agent after a restart;
// the boot id file says whether the host rebooted in between. A process
// from an earlier boot is never taken for the workload, nor signalled,
// even when its pid and start time now name a live process of the same
// user; without boot ids the start time alone decides.
func TestRebootIsRecognised(t *testing.T) {
	t.Parallel()
	lostRebooted := func(pid int) state.ExecutionState {
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
			AdditionalInfo: "process " + strconv.Itoa(pid) + " was started before the host restarted"}
	}
	lostGone := func(pid int) state.ExecutionState {
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
			AdditionalInfo: "process " + strconv.Itoa(pid) + " is gone and its exit was not recorded"}
	}
	tests := []struct {
		name string
		// reboot changes the boot id between the two Runtimes.
		reboot bool
		// kill ends shim and workload without an exit record.
		kill bool
		// bystander: the record's pid (and, with sameStart, its start
		// time) is made that of an unrelated live process.
		bystander, sameStart bool
		// noBootID drops the boot ids from the record, as a record
		// written before they were kept.
		noBootID bool
		// want is the state the second Runtime sees, given the
		// recorded pid.
		want func(pid int) state.ExecutionState
	}{
		{name: "agent_restart", want: func(int) state.ExecutionState { return state.RunningOk }},
		{name: "reboot_processes_gone", reboot: true, kill: true, want: lostRebooted},
		{name: "reboot_pid_and_start_time_reused", reboot: true, kill: true, bystander: true, sameStart: true, want: lostRebooted},
		{name: "reboot_pid_reused", reboot: true, kill: true, bystander: true, want: lostRebooted},
		{name: "same_boot_pid_reused", kill: true, bystander: true, want: lostGone},
		{name: "no_boot_ids_pid_reused", reboot: true, kill: true, bystander: true, noBootID: true, want: lostGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runFolder := t.TempDir()
			first := newHarness(t, Config{RunFolder: runFolder, BootIDFile: bootFile(t, "boot-1")})
			s := first.spec("svc", "command: sleep\nargs: ['300']")
			id, err := first.rt.Create(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			rs := first.records(id)
			if rs.child.BootID != "boot-1" || rs.shim.BootID != "boot-1" {
				t.Fatalf("recorded boot ids %q and %q, want boot-1", rs.child.BootID, rs.shim.BootID)
			}
			workload := rs.child.PID
			t.Cleanup(func() { syscall.Kill(-workload, syscall.SIGKILL) })
			pid := workload
			if tt.kill {
				powerLoss(t, rs)
			}
			if tt.bystander || tt.noBootID {
				c := *rs.child
				if tt.bystander {
					var start uint64
					c.PID, start = startBystander(t)
					c.StartTime = start + 1
					if tt.sameStart {
						c.StartTime = start
					}
					pid = c.PID
				}
				if tt.noBootID {
					c.BootID, c.Shim.BootID = "", ""
				}
				dir, _ := first.rt.recordDir(id)
				if err := writeJSON(filepath.Join(dir, recordFile), c); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(dir, shimFile)); err != nil {
					t.Fatal(err)
				}
			}

			boot := "boot-1"
			if tt.reboot {
				boot = "boot-2"
			}
			second := newHarness(t, Config{RunFolder: runFolder, BootIDFile: bootFile(t, boot)})
			found, err := second.rt.List(context.Background(), "agentA")
			if err != nil || len(found) != 1 || found[0].ID != id {
				t.Fatalf("List = %+v, %v; want %s", found, err, id)
			}
			if got, want := second.state(id), tt.want(pid); got != want {
				t.Fatalf("state %v, want %v", got, want)
			}
			if err := second.rt.Delete(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if _, err := second.rt.State(context.Background(), id); !isNotFound(err) {
				t.Fatalf("State after Delete: %v, want ErrNotFound", err)
			}
			// Delete returns once what it signalled is gone: a process
			// that still runs now was never signalled.
			if tt.bystander && processGone(pid) {
				t.Fatalf("Delete killed process %d, which only holds a recorded pid", pid)
			}
			if !tt.kill && !processGone(pid) {
				t.Fatalf("Delete left the workload %d running", pid)
			}
		})
	}
}

// A new instance after a reboot records the new boot.
func TestCreateRecordsTheBoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{BootIDFile: bootFile(t, "boot-7")})
	id := h.create(h.spec("svc", "command: sleep\nargs: ['60']"))
	var sp specRecord
	dir, _ := h.rt.recordDir(id)
	if err := readJSON(filepath.Join(dir, specFile), &sp); err != nil {
		t.Fatal(err)
	}
	rs := h.records(id)
	if sp.BootID != "boot-7" || rs.child.BootID != "boot-7" || rs.child.Shim.BootID != "boot-7" || rs.shim.BootID != "boot-7" {
		t.Fatalf("boot ids: spec %q, workload %q, shim %q/%q; want boot-7", sp.BootID, rs.child.BootID, rs.child.Shim.BootID, rs.shim.BootID)
	}
	if st := h.state(id); st != state.RunningOk {
		t.Fatalf("state %v", st)
	}
}
