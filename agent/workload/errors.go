package workload

import "errors"

// ErrUnknownRuntime is wrapped when a workload names a runtime this agent
// does not have; the instance stays Pending(StartingFailed).
var ErrUnknownRuntime = errors.New("unknown runtime")

// ErrNoWorkload is wrapped when an Added carries no workload spec.
var ErrNoWorkload = errors.New("missing workload spec")

// reasonError is an error whose text is written for the workload's
// additionalInfo, wrapping the sentinel that classifies it.
type reasonError struct {
	msg  string
	kind error
}

func (e *reasonError) Error() string { return e.msg }

func (e *reasonError) Unwrap() error { return e.kind }
