package render

import "fmt"

// templateError is a problem with one template, located by its line. It
// becomes the reason of a state.FieldError naming the rendered field.
type templateError struct {
	line int
	msg  string
}

func (e *templateError) Error() string {
	if e.line <= 0 {
		return e.msg
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func errorf(line int, format string, args ...any) *templateError {
	return &templateError{line: line, msg: fmt.Sprintf(format, args...)}
}
