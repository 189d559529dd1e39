package fsm

import "fmt"

// Decode decodes one command (not a batch) exactly as Apply will: its
// type and its body. The leader runs it on every command before proposing
// it, so that an entry that commits always decodes; Apply treats one that
// does not as a version mismatch. A body of an unknown type marked
// IgnoreUnknownTypeFlag decodes to nil; a retired type panics (see
// commands.go).
func Decode(cmd []byte) (MessageType, Command, error) {
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

// CheckType refuses a command whose type, or the type of a command in
// its batch, this version does not know and may not skip, or has retired. A replica runs
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
	if why, ok := retired[t]; ok {
		return fmt.Errorf("%w: %d (%s) is retired: %s", ErrUnknownType, uint8(t), t, why)
	}
	if _, known := typeNames[t]; known && t != BatchType || t&IgnoreUnknownTypeFlag != 0 {
		return nil
	}
	return fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
}
