package logs

import (
	"errors"
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// ErrBadRequest is wrapped when a LogsRequest cannot be carried out; the
// message names the field and the reason.
var ErrBadRequest = errors.New("invalid logs request")

// options turns the request's options into the runtime's: no tail means
// every line, since and until are RFC 3339 times.
//
// swdd~agent-log-request-configuration~1
func options(r *ankbase.LogsRequest) (runtime.LogOptions, error) {
	o := runtime.LogOptions{Follow: r.GetFollow(), Tail: -1}
	if r == nil {
		return o, nil
	}
	if r.Tail != nil {
		o.Tail = int(r.GetTail())
	}
	var err error
	if o.Since, err = parseTime("since", r.Since); err != nil {
		return o, err
	}
	if o.Until, err = parseTime("until", r.Until); err != nil {
		return o, err
	}
	return o, nil
}

func parseTime(field string, v *string) (time.Time, error) {
	if v == nil || *v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: logsRequest.%s: '%s' is not an RFC 3339 time", ErrBadRequest, field, *v)
	}
	return t, nil
}
