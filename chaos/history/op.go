package history

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what an operation does to the desired state.
type Kind string

// The operations the chaos clients issue.
const (
	Write  Kind = "write"  // UpdateState setting one workload to a unique value
	Read   Kind = "read"   // GetCompleteState of the clients' workloads
	Delete Kind = "delete" // UpdateState removing one workload
)

// Outcome is what the client learned about an operation.
type Outcome string

// The outcomes. Fail means definitely not applied; Unknown means maybe.
const (
	OK      Outcome = "ok"
	Fail    Outcome = "fail"
	Unknown Outcome = "unknown"
)

// ErrInvalid marks a history that cannot be checked (bad JSON field).
var ErrInvalid = errors.New("invalid history")

// Op is one request of one client.
type Op struct {
	ID     int64             `json:"id"` // unique, assigned by the Recorder
	Client int               `json:"client"`
	Kind   Kind              `json:"kind"`
	Key    string            `json:"key,omitempty"`   // workload written/deleted; "" for a read of all keys
	Value  string            `json:"value,omitempty"` // the unique value written (Write)
	Read   map[string]string `json:"read,omitempty"`  // Read: every key → value observed
	Call   time.Time         `json:"call"`
	// Return is zero while pending; Unknown ops keep the time they gave up.
	Return  time.Time `json:"return"`
	Outcome Outcome   `json:"outcome,omitempty"`
	Err     string    `json:"err,omitempty"`
	Replica string    `json:"replica,omitempty"` // replica that answered, when known
}

// String is a one-line form for reports: "#12 c3 write wl-1=v7 ok [0.120s..0.135s]"
// with times relative to the zero time.
func (o Op) String() string {
	var what string
	switch o.Kind {
	case Read:
		what = fmt.Sprintf("read %v", o.Read)
		if o.Key != "" {
			what = fmt.Sprintf("read %s %v", o.Key, o.Read)
		}
	case Write:
		what = fmt.Sprintf("write %s=%s", o.Key, o.Value)
	default:
		what = fmt.Sprintf("%s %s", o.Kind, o.Key)
	}
	ret := "pending"
	if !o.Return.IsZero() {
		ret = o.Return.Format("15:04:05.000000")
	}
	s := fmt.Sprintf("#%d c%d %s %s [%s .. %s]", o.ID, o.Client, what, o.Outcome, o.Call.Format("15:04:05.000000"), ret)
	if o.Replica != "" {
		s += " by " + o.Replica
	}
	if o.Err != "" {
		s += ": " + o.Err
	}
	return s
}

// validate names the first field of o that a checker cannot use.
func (o Op) validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: op %d: field %q: %s", ErrInvalid, o.ID, field, reason)
	}
	switch o.Kind {
	case Write:
		if o.Key == "" {
			return bad("key", "a write needs the workload it sets")
		}
		if o.Value == "" {
			return bad("value", "a write needs its unique value")
		}
	case Delete:
		if o.Key == "" {
			return bad("key", "a delete needs the workload it removes")
		}
	case Read:
	default:
		return bad("kind", fmt.Sprintf("unknown kind %q (want write, read or delete)", o.Kind))
	}
	switch o.Outcome {
	case OK, Fail, Unknown, "":
	default:
		return bad("outcome", fmt.Sprintf("unknown outcome %q (want ok, fail or unknown)", o.Outcome))
	}
	if o.Call.IsZero() {
		return bad("call", "missing")
	}
	if !o.Return.IsZero() && o.Return.Before(o.Call) {
		return bad("return", "before the call")
	}
	if o.Outcome != "" && o.Return.IsZero() {
		return bad("return", "missing for a finished op")
	}
	return nil
}
