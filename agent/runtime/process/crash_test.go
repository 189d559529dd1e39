package process

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
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
			rs, err := readRecords(c.Path(dir))
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
