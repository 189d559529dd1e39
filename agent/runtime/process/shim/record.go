package shim

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
)

// Names of the files in a record directory (see the process package's
// doc) that the shim reads or writes.
const (
	SpecFile       = "spec.json"
	RecordFile     = "record.json"
	StartErrorFile = "start-error"
	ExitFile       = "exit"
	LogFile        = "output.log"
)

// Spec is what the shim starts: the parsed runtimeConfig and the paths
// the runtime exposes in the environment.
type Spec struct {
	Instance   string            `json:"instance"`
	Command    string            `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	// Home is the workload's own directory, its HOME.
	Home string `json:"home,omitempty"`
	// User is who the workload runs as; nil = the shim's own user.
	User             *User  `json:"user,omitempty"`
	ControlInterface string `json:"controlInterface,omitempty"`
	FilesDir         string `json:"filesDir,omitempty"`
	// BootID is the boot Create ran in; the shim records its processes
	// with it.
	BootID string `json:"bootId,omitempty"`
}

// User is a uid and the gid that goes with it.
type User struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// ProcRef names one process beyond pid reuse: a pid together with its
// start time in clock ticks since boot, and the boot. Pid and start time
// are only unique within one boot: after a power cycle the same pair may
// name an unrelated process started at the same point of a similar boot.
type ProcRef struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	BootID    string `json:"bootId,omitempty"`
}

// ChildRecord is the record the shim writes once the workload runs.
type ChildRecord struct {
	ProcRef
	Shim      ProcRef   `json:"shim"`
	StartedAt time.Time `json:"startedAt"`
}

// ExitRecord says how the workload ended: an exit code, or the signal
// that killed it.
type ExitRecord struct {
	Code   int       `json:"code"`
	Signal int       `json:"signal,omitempty"`
	At     time.Time `json:"at"`
}

// WriteJSON writes one record file so that a reader sees the old file
// or the new one, never half of one, and a power cut after it returned
// the new one (durable.WriteFile).
func WriteJSON(path string, v any) error { return WriteJSONTo(durable.OS, path, v) }

// WriteJSONTo is WriteJSON through files.
func WriteJSONTo(files durable.Files, path string, v any) error {
	return writeRecord(files.WriteFile, path, v)
}

// writeRecord writes v as one line of JSON to path with write.
func writeRecord(write func(string, []byte, fs.FileMode) error, path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return write(path, append(data, '\n'), 0o600)
}

// WriteBootRecord writes a record that names processes of the running
// boot (RecordFile, and the agent's shim.json) so that a reader sees the
// old file or the new one, never half of one, without syncing it
// (durable.WriteFileUnsynced): a power cut ends those processes, and
// what it leaves of such a record (nothing, the old one, an empty or a
// torn file) a reader of an earlier boot's records takes for a record
// that was never written (see the process runtime's readRecords). The
// workload's start waits for its record; the two syncs were most of it.
func WriteBootRecord(path string, v any) error { return WriteBootRecordTo(durable.OS, path, v) }

// WriteBootRecordTo is WriteBootRecord through files.
func WriteBootRecordTo(files durable.Files, path string, v any) error {
	return writeRecord(files.WriteFileUnsynced, path, v)
}

// ReadJSON reads one record file; a missing file gives fs.ErrNotExist.
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}
