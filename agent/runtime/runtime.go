package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/grapnel-io/grapnel/state"
)

// ErrNotFound is wrapped when the runtime has no instance with the given
// ID (it was removed, or never existed on this host).
var ErrNotFound = errors.New("workload instance not found")

// ErrBadConfig is wrapped by every runtimeConfig error; the message names
// the field and the reason, and becomes the additionalInfo of
// Pending(StartingFailed).
var ErrBadConfig = errors.New("invalid runtimeConfig")

// ConfigError names the runtimeConfig field a runtime refused and why;
// it wraps ErrBadConfig. Every runtime's parser returns it.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, ErrBadConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrBadConfig }

// BadConfig is the ConfigError of field, its reason formatted.
func BadConfig(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ID is what a runtime calls one instance: for the process runtime the
// instance's record directory key, for podman the container id. It is
// opaque to the agent.
type ID string

// Runtime runs workload instances of one kind.
//
// Every method may be called from several goroutines at once, for
// different instances.
type Runtime interface {
	// Name is the workload's `runtime` value this runtime serves.
	Name() string
	// Check parses a rendered runtimeConfig; the error wraps
	// ErrBadConfig and names the field and the reason.
	Check(runtimeConfig string) error
	// Create starts a new instance and returns its ID once the runtime
	// has accepted it (the process is started, the container created and
	// started). An instance of the same name left over from before is
	// replaced.
	Create(ctx context.Context, s Spec) (ID, error)
	// State observes an instance: Running(Ok), Succeeded(Ok),
	// Failed(ExecFailed) with the exit code in AdditionalInfo,
	// Failed(Lost) when it vanished, Failed(Unknown) when the runtime
	// cannot say, Pending(Starting) while it is still starting.
	State(ctx context.Context, id ID) (state.ExecutionState, error)
	// Delete stops the instance (SIGTERM, then SIGKILL after a grace
	// period) and removes what the runtime kept of it. Deleting an
	// instance that is already gone is not an error.
	Delete(ctx context.Context, id ID) error
	// List returns the instances this runtime started for the named
	// agent on this host, running or ended, so that a restarted agent
	// can adopt them.
	List(ctx context.Context, agent string) ([]Found, error)
	// Logs opens the instance's output, stdout and stderr merged, one
	// line per '\n'. Without Follow the reader ends (io.EOF) after what
	// is there now; with Follow it ends when the instance ends and its
	// output is drained, or when ctx ends or the reader is closed.
	Logs(ctx context.Context, id ID, o LogOptions) (io.ReadCloser, error)
}

// Spec is what Create needs for one instance.
type Spec struct {
	Instance state.InstanceName
	// Workload is the rendered workload: RuntimeConfig is final.
	Workload *state.Workload
	// Mounts are the workload's files, already written read-only on the
	// host. Containers get them bind-mounted read-only at MountPoint; a
	// process finds them under FilesDir.
	Mounts []Mount
	// FilesDir is the host directory that holds the files at their mount
	// point paths (FilesDir + MountPoint); "" when there are none. The
	// process runtime exposes it as GRAPNEL_FILES.
	FilesDir string
	// ControlInterface is the host directory holding the FIFOs `input`
	// and `output`; "" when the workload has no control interface.
	// Containers get it mounted at ContainerControlInterface; a process
	// gets the path in the environment variable ControlInterfaceEnv.
	ControlInterface string
	// RunDir is a directory the runtime may use for this instance's own
	// files (<run folder>/<agent>_io/<instance>/); it exists.
	RunDir string
}

// Mount is one workload file.
type Mount struct {
	HostPath   string
	MountPoint string
}

// Found is one instance a runtime still knows of.
type Found struct {
	Instance state.InstanceName
	ID       ID
}

// LogOptions select the lines Logs returns, as `podman logs` does.
type LogOptions struct {
	Follow bool
	// Tail is how many of the newest lines to start with; < 0 means all.
	Tail int
	// Since and Until bound the lines by the time they were written;
	// zero means unbounded.
	Since, Until time.Time
}

// Where a workload finds its control interface.
const (
	// ContainerControlInterface is the mount point inside a container.
	ContainerControlInterface = "/run/ankaios/control_interface"
	// ControlInterfaceEnv names the environment variable that gives a
	// process the host directory of its FIFOs.
	ControlInterfaceEnv = "ANKAIOS_CONTROL_INTERFACE"
	// FilesEnv names the environment variable that gives a process the
	// directory under which its files sit at their mount point paths.
	FilesEnv = "GRAPNEL_FILES"
)
