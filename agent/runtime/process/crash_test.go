package process

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
	"github.com/grapnel-io/grapnel/state"
)

// A power cut while a new workload's uid is kept leaves the table the
// agent loads at its next start with the earlier assignments whole, and
// the new one either not yet given or given; once assign returned it is
// there, so the workload's files stay its own after the cut.
func TestUIDTableCrashSafe(t *testing.T) {
	const path = "/run/" + uidFile
	rng := UIDRange{First: 100, Last: 109}
	old, err := json.Marshal(uidFileBody{Range: rng.String(), Workloads: map[string]uint32{"a": 104}})
	if err != nil {
		t.Fatal(err)
	}
	table := func(m *crashfs.FS) *uidTable {
		return &uidTable{path: path, rng: rng, files: durable.On(m), uids: map[string]uint32{"a": 104}}
	}
	empty := crashfs.New()
	empty.SeedDir("/run")
	given, err := table(empty).assign("b")
	if err != nil {
		t.Fatal(err)
	}
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) { m.Seed(path, append(old, '\n'), 0o600) },
		Run: func(m *crashfs.FS) error {
			_, err := table(m).assign("b")
			return err
		},
		Check: func(c crashfs.Crash) error {
			tab, err := loadUIDTable(c.Path(path), rng)
			switch {
			case err != nil:
				return err
			case tab.uids["a"] != 104:
				return fmt.Errorf("workload a lost its uid: %v", tab.uids)
			case c.Done && tab.uids["b"] != given:
				return fmt.Errorf("workload b has no uid once assign returned: %v", tab.uids)
			case len(tab.uids) != 1 && tab.uids["b"] != given:
				return fmt.Errorf("the table holds %v", tab.uids)
			}
			return nil
		},
	})
}

// A power cut while the shim records how a workload ended leaves a
// record directory the agent reads without error: the exit recorded
// whole, or not recorded; once the shim's write returned, recorded.
func TestRecordsCrashSafe(t *testing.T) {
	dir := "/run/agent_A_io/w.1.agent_A/" + recordSubdir
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	child, err := json.Marshal(childRecord{ProcRef: shim.ProcRef{PID: 42, StartTime: 7, BootID: "b"}, StartedAt: start})
	if err != nil {
		t.Fatal(err)
	}
	exit := exitRecord{Code: 3, At: start.Add(time.Minute)}
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) {
			m.Seed(dir+"/"+specFile, []byte(`{"instance":"w.1.agent_A","command":"true"}`+"\n"), 0o600)
			m.Seed(dir+"/"+recordFile, append(child, '\n'), 0o600)
		},
		Run: func(m *crashfs.FS) error {
			return shim.WriteJSONTo(durable.On(m), filepath.Join(dir, exitFile), shim.ExitRecord(exit))
		},
		Check: func(c crashfs.Crash) error {
			rs, err := readRecords(c.Path(dir), "b")
			switch {
			case err != nil:
				return err
			case rs.child == nil || rs.child.PID != 42:
				return fmt.Errorf("the workload's record is gone: %+v", rs.child)
			case rs.exit == nil && c.Done:
				return fmt.Errorf("no exit recorded once the write returned")
			case rs.exit != nil && (rs.exit.Code != exit.Code || !rs.exit.At.Equal(exit.At)):
				return fmt.Errorf("exit recorded as %+v, want %+v", *rs.exit, exit)
			}
			return nil
		},
	})
}

// The shim's record is written without a sync: a power cut while it is
// written leaves it whole, missing, empty or torn. The agent of the next
// boot reads such a directory without an error: the workload is not
// recorded, or recorded whole, and either way it is lost, never
// unknown (which would keep the agent asking instead of replacing it).
// The same holds in a pid namespace used as a power domain, where the
// boot stays and start times tell the processes apart. While the shim
// lives, a record that cannot be read stays an error: the workload may
// run.
func TestBootRecordAfterPowerCut(t *testing.T) {
	dir := "/run/agent_A_io/w.1.agent_A/" + recordSubdir
	spec := []byte(`{"instance":"w.1.agent_A","command":"true","bootId":"b1"}` + "\n")
	// Pids beyond any pid_max: processes that ended with the power cut.
	shimRef := shim.ProcRef{PID: 1 << 30, StartTime: 6, BootID: "b1"}
	child := childRecord{ProcRef: shim.ProcRef{PID: 1<<30 + 1, StartTime: 7, BootID: "b1"}, Shim: shimRef}
	for _, boot := range []string{"b2", "b1"} {
		crashfs.Check(t, crashfs.Sequence{
			Seed: func(m *crashfs.FS) { m.Seed(dir+"/"+specFile, spec, 0o600) },
			Run: func(m *crashfs.FS) error {
				f := durable.On(m)
				if err := shim.WriteBootRecordTo(f, filepath.Join(dir, shimFile), shimRef); err != nil {
					return err
				}
				return shim.WriteBootRecordTo(f, filepath.Join(dir, recordFile), child)
			},
			Check: func(c crashfs.Crash) error {
				rs, err := readRecords(c.Path(dir), boot)
				switch {
				case err != nil:
					return fmt.Errorf("boot %s cannot read the records: %w", boot, err)
				case rs.child != nil && rs.child.PID != child.PID:
					return fmt.Errorf("the workload recorded as %+v", rs.child)
				}
				if s := stateOf(c.Path(dir), boot, rs); s.State != state.StateFailed || s.SubState != state.SubLost {
					return fmt.Errorf("state after the power cut %v, want Failed(Lost)", s)
				}
				return nil
			},
		})
	}

	// This test's process stands for a shim that lives.
	self := procRef{PID: os.Getpid(), BootID: "b1"}
	var err error
	if self.StartTime, err = startTime(self.PID); err != nil {
		t.Fatal(err)
	}
	real := t.TempDir()
	if err := shim.WriteBootRecord(filepath.Join(real, shimFile), self); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, recordFile), []byte(`{"pid":4`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecords(real, "b1"); err == nil {
		t.Fatal("a record that cannot be read while its shim lives was taken for none")
	}
	if rs, err := readRecords(real, "b2"); err != nil || rs.child != nil {
		t.Fatalf("a torn record of an earlier boot: %+v, %v; want none and no error", rs.child, err)
	}

	// A record the storage cannot read (here a directory where the file
	// should be) is not what a power cut leaves of a write: an error.
	unreadable := t.TempDir()
	if err := os.Mkdir(filepath.Join(unreadable, recordFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecords(unreadable, "b2"); err == nil {
		t.Fatal("a record that could not be read was taken for none")
	}
}
