package state

import (
	"errors"
	"fmt"
)

// ErrInvalid marks every rejection of user input by this package. Callers
// map it to InvalidArgument without looking at the text.
var ErrInvalid = errors.New("invalid state")

// FieldError names the field that was rejected and why.
type FieldError struct {
	Path   string
	Reason string
	// limit is set for a value over a limit (see LimitError), budget
	// for work over a request's budget (BudgetError).
	limit, budget bool
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalid) hold, errors.Is(err, ErrLimit)
// for a value over a limit, and errors.Is(err, ErrBudget) for work over
// a request's budget.
func (e *FieldError) Unwrap() []error {
	if e.budget {
		return []error{ErrInvalid, ErrLimit, ErrBudget}
	}
	if e.limit {
		return []error{ErrInvalid, ErrLimit}
	}
	return []error{ErrInvalid}
}

func fieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
