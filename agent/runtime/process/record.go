package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/state"
)

// Names of the files in a record directory (see the package doc); the
// shim's are shared with package shim.
const (
	recordSubdir   = "process"
	workSubdir     = "work"
	specFile       = shim.SpecFile
	shimFile       = "shim.json"
	recordFile     = shim.RecordFile
	startErrorFile = shim.StartErrorFile
	exitFile       = shim.ExitFile
	logFile        = shim.LogFile
	shimLogFile    = "shim.log"
)

// The records the shim reads and writes are package shim's, which the
// small grapnel-process-shim binary builds from.
type (
	// specRecord is what the shim starts (written by Create).
	specRecord = shim.Spec
	// childRecord is the record the shim writes once the workload runs.
	childRecord = shim.ChildRecord
	// procRef names one process beyond pid reuse (see shim.ProcRef).
	procRef shim.ProcRef
	// exitRecord says how the workload ended: an exit code, or the
	// signal that killed it.
	exitRecord shim.ExitRecord
)

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

func writeJSON(path string, v any) error { return shim.WriteJSON(path, v) }

// writeBootRecord writes a record of the running boot's processes,
// unsynced (shim.WriteBootRecord).
func writeBootRecord(path string, v any) error { return shim.WriteBootRecord(path, v) }

// readJSON reads one record file; a missing file gives fs.ErrNotExist.
func readJSON(path string, v any) error { return shim.ReadJSON(path, v) }

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
	return (*procRef)(&rs.child.ProcRef)
}

// readRecords reads the record directory; it wraps runtime.ErrNotFound
// when the directory is gone. boot is the id of the running boot. The
// shim's record and shim.json are written without a sync
// (shim.WriteBootRecord): a power cut may leave either one empty or
// torn, and the processes they named ended with it. So one whose
// content is not a record counts as never written, unless the workload
// may still run: the shim.json's shim lives (same boot, same start
// time), and the record that names the workload is what does not parse;
// that stays an error, as does any file the storage cannot read, so
// that nothing is started beside a workload the agent lost track of.
func readRecords(dir, boot string) (records, error) {
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
	var s procRef
	switch err := readJSON(filepath.Join(dir, shimFile), &s); {
	case err == nil:
		rs.shim = &s
	case !errors.Is(err, fs.ErrNotExist) && !torn(err):
		return rs, err
	}
	var c childRecord
	switch err := readJSON(filepath.Join(dir, recordFile), &c); {
	case err == nil:
		rs.child = &c
	case errors.Is(err, fs.ErrNotExist):
	case !torn(err) || rs.shim.alive(boot):
		return rs, err
	}
	if rs.child != nil && rs.shim == nil {
		rs.shim = (*procRef)(&rs.child.Shim)
	}
	if data, err := os.ReadFile(filepath.Join(dir, startErrorFile)); err == nil {
		rs.startErr = strings.TrimSpace(string(data))
	}
	return rs, nil
}

// torn reports whether err is a record file's content that is not JSON of
// the record (what a power cut leaves of an unsynced write: empty, zeros,
// half), as opposed to a file the storage could not read.
func torn(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ)
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
