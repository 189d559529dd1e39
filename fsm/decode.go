package fsm

import (
	"encoding/json"
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// Decode decodes one command (not a batch) exactly as Apply will: its
// type and a pointer to its request struct. The leader runs it on every
// command before proposing it, so that an entry that commits always
// decodes; Apply treats one that does not as a version mismatch. A body
// of an unknown type marked IgnoreUnknownTypeFlag decodes to nil.
func Decode(cmd []byte) (MessageType, any, error) {
	if len(cmd) == 0 {
		return 0, nil, fmt.Errorf("%w: empty command", ErrUndecodable)
	}
	t := MessageType(cmd[0])
	if t == BatchType {
		return t, nil, fmt.Errorf("%w: %s is decoded with SplitBatch", ErrBadCommand, t)
	}
	body, err := decodeBody(t, cmd[1:])
	return t, body, err
}

// decodeBody decodes the body of a command of type t.
func decodeBody(t MessageType, buf []byte) (any, error) {
	var body any
	switch t {
	case UpdateDesiredStateType, UpdateDesiredStateSeqType:
		body = &UpdateDesiredStateRequest{}
	case UpdateDesiredStatePackedType:
		r := &UpdateDesiredStateRequest{}
		if err := decodePacked(buf, r); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrUndecodable, t, err)
		}
		return r, checkUpdate(t, r)
	case AgentConnectedType:
		body = &AgentConnectedRequest{}
	case AgentGoneType:
		body = &AgentGoneRequest{}
	case AgentLoadType:
		body = &AgentLoadRequest{}
	case WorkloadStatesType:
		body = &WorkloadStatesRequest{}
	case WorkloadReportsType:
		body = &WorkloadReportsRequest{}
	default:
		if t&IgnoreUnknownTypeFlag != 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
	}
	if err := json.Unmarshal(buf, body); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUndecodable, t, err)
	}
	if r, ok := body.(*UpdateDesiredStateRequest); ok {
		return r, checkUpdate(t, r)
	}
	return body, nil
}

// checkUpdate refuses a desired-state update that decodes but that the
// store could not apply: a nil workload, or a rendering without one.
func checkUpdate(t MessageType, r *UpdateDesiredStateRequest) error {
	u := &r.Update
	for _, n := range state.SortedKeys(u.PutWorkloads) {
		if u.PutWorkloads[n] == nil {
			return fmt.Errorf("%w: %s: workload %q has no body", ErrUndecodable, t, n)
		}
	}
	for _, n := range state.SortedKeys(u.PutRendered) {
		if u.PutRendered[n].Workload == nil {
			return fmt.Errorf("%w: %s: rendered workload %q has no body", ErrUndecodable, t, n)
		}
	}
	return nil
}

// CheckType refuses a command whose type, or the type of a command in
// its batch, this version does not know and may not skip. A replica runs
// it on every entry the leader sends, before Raft stores it, so that an
// entry no replica of this version could apply is never appended here:
// it costs a look at the type bytes, not a decode.
func CheckType(cmd []byte) error {
	if len(cmd) == 0 {
		return nil
	}
	t := MessageType(cmd[0])
	if t == BatchType {
		cmds, err := splitBatch(cmd[1:])
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUndecodable, t, err)
		}
		for i, c := range cmds {
			if err := checkOne(MessageType(c[0])); err != nil {
				return fmt.Errorf("command %d of a batch: %w", i, err)
			}
		}
		return nil
	}
	return checkOne(t)
}

func checkOne(t MessageType) error {
	if _, known := typeNames[t]; known && t != BatchType || t&IgnoreUnknownTypeFlag != 0 {
		return nil
	}
	return fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
}
