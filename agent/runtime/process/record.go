package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// Names of the files in a record directory (see the package doc).
const (
	recordSubdir   = "process"
	specFile       = "spec.json"
	shimFile       = "shim.json"
	recordFile     = "record.json"
	startErrorFile = "start-error"
	exitFile       = "exit"
	logFile        = "output.log"
	shimLogFile    = "shim.log"
)

// specRecord is what the shim starts: the parsed runtimeConfig and the
// paths the runtime exposes in the environment.
type specRecord struct {
	Instance         string            `json:"instance"`
	Command          string            `json:"command"`
	Args             []string          `json:"args,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	WorkingDir       string            `json:"workingDir,omitempty"`
	ControlInterface string            `json:"controlInterface,omitempty"`
	FilesDir         string            `json:"filesDir,omitempty"`
	// BootID is the boot Create ran in; the shim records its processes
	// with it.
	BootID string `json:"bootId,omitempty"`
}

// procRef names one process beyond pid reuse: a pid together with its
// start time in clock ticks since boot, and the boot. Pid and start time
// are only unique within one boot: after a power cycle the same pair may
// name an unrelated process started at the same point of a similar boot.
type procRef struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	BootID    string `json:"bootId,omitempty"`
}

// childRecord is the record the shim writes once the workload runs.
type childRecord struct {
	procRef
	Shim      procRef   `json:"shim"`
	StartedAt time.Time `json:"startedAt"`
}

// exitRecord says how the workload ended: an exit code, or the signal
// that killed it.
type exitRecord struct {
	Code   int       `json:"code"`
	Signal int       `json:"signal,omitempty"`
	At     time.Time `json:"at"`
}

// state is the execution state this ending stands for.
func (e exitRecord) state() state.ExecutionState {
	switch {
	case e.Signal != 0:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed,
			AdditionalInfo: fmt.Sprintf("killed by signal %d", e.Signal)}
	case e.Code != 0:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed,
			AdditionalInfo: fmt.Sprintf("exit code %d", e.Code)}
	}
	return state.SucceededOk
}

// recordDir maps an ID to its record directory, refusing IDs that are
// not instance names so that no ID can point outside the run folder.
func (r *Runtime) recordDir(id runtime.ID) (string, error) {
	inst, err := parseID(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.cfg.RunFolder, inst.AgentName+"_io", string(id), recordSubdir), nil
}

func parseID(id runtime.ID) (state.InstanceName, error) {
	inst, err := state.ParseInstanceName(string(id))
	if err == nil && (!validPart(inst.WorkloadName) || !validPart(inst.ID) || !validPart(inst.AgentName)) {
		err = errors.New("a part is empty or uses characters other than [a-zA-Z0-9_-]")
	}
	if err != nil {
		return state.InstanceName{}, fmt.Errorf("%w: process runtime ID %q: %v", runtime.ErrNotFound, id, err)
	}
	return inst, nil
}

func validPart(s string) bool { return s != "" && state.ValidName(s) }

// writeFileAtomic writes data to a temporary file next to path, syncs it
// and renames it over path, so a reader sees the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// readJSON reads one record file; a missing file gives fs.ErrNotExist.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// records is a snapshot of what a record directory holds.
type records struct {
	child    *childRecord
	shim     *procRef
	exit     *exitRecord
	startErr string
}

// childRef is the workload process, nil before it started.
func (rs records) childRef() *procRef {
	if rs.child == nil {
		return nil
	}
	return &rs.child.procRef
}

// readRecords reads the record directory; it wraps runtime.ErrNotFound
// when the directory is gone.
func readRecords(dir string) (records, error) {
	var rs records
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rs, fmt.Errorf("%w: no process record at %s", runtime.ErrNotFound, dir)
		}
		return rs, err
	}
	var e exitRecord
	switch err := readJSON(filepath.Join(dir, exitFile), &e); {
	case err == nil:
		rs.exit = &e
	case !errors.Is(err, fs.ErrNotExist):
		return rs, err
	}
	var c childRecord
	switch err := readJSON(filepath.Join(dir, recordFile), &c); {
	case err == nil:
		rs.child = &c
	case !errors.Is(err, fs.ErrNotExist):
		return rs, err
	}
	var s procRef
	switch err := readJSON(filepath.Join(dir, shimFile), &s); {
	case err == nil:
		rs.shim = &s
	case !errors.Is(err, fs.ErrNotExist):
		return rs, err
	}
	if rs.child != nil && rs.shim == nil {
		rs.shim = &rs.child.Shim
	}
	if data, err := os.ReadFile(filepath.Join(dir, startErrorFile)); err == nil {
		rs.startErr = strings.TrimSpace(string(data))
	}
	return rs, nil
}

// tailFile returns the end of a small diagnostics file, for error texts.
func tailFile(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return strings.TrimSpace(string(data))
}
